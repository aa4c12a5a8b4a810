"""The `tfguard` command: one library call per subcommand, no logic here.

`main(argv)` parses, calls the library, renders with rich, and maps typed
exceptions to one red `ERROR` line plus a hint and an exit code.

Example:

>>> from tfguard._cli import main
>>> main(["--version"])  # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from tfguard import __version__, _tags
from tfguard._errors import TfguardError
from tfguard._text import SafeStream, printable


class _Console(Console):
    """rich's console, but a reader that closed the pipe ends the command as `print` does (`main`)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError("the reader of the output closed it")


def _console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that degrades to ASCII on a terminal that needs it."""
    stream = SafeStream(sys.stderr if stderr else sys.stdout)
    return _Console(file=stream, stderr=stderr, highlight=False, soft_wrap=True)


def cmd_replay(args) -> int:
    from tfguard._findings import strict_json
    from tfguard._forensics import StoredReplayWarning, replay

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoredReplayWarning)  # the summary's first line says it
        report = replay(args.path, imports=args.imports)
    if args.json:  # strict JSON: a NaN loss is "NaN", as in every tfguard JSON document
        print(json.dumps(strict_json(report.to_dict()), indent=2, allow_nan=False))
    else:
        _console().print(Text(printable(report.summary())))
    return 0


def cmd_doctor(args) -> int:
    from tfguard.doctor import doctor_exit_code, doctor_json, render_doctor, run_doctor

    checks = run_doctor()
    if args.json:
        print(doctor_json(checks))
    else:
        render_doctor(checks, _console())
    return doctor_exit_code(checks)


def cmd_train(args) -> int:
    from tfguard.reference._train import load_config, render_train_result

    config = load_config(
        args.config,
        data=args.data,
        model=args.model,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        optimizer=args.optimizer,
        augment=args.augment,
        seed=args.seed,
        logdir=args.logdir,
        export_dir=args.export_dir,
        max_samples=args.max_samples,
    )
    console = _console()
    from tfguard._workflow import train_observed

    result = train_observed(config, policy=args.policy, progress=console.print)
    render_train_result(result.train, console)
    result.render(console)
    return 0


def cmd_export(args) -> int:
    from tfguard.reference._export import export_run, render_export

    render_export(export_run(args.run_dir, args.out, tflite=not args.no_tflite), _console())
    return 0


def cmd_parity(args) -> int:
    from tfguard.reference._parity import parity, render_parity

    result = parity(args.export_dir, samples=args.samples)
    render_parity(result, _console())
    result.check()
    return 0


def cmd_demo(args) -> int:
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from tfguard._workflow import demo

    console = _console()
    steps = ("epoch ", "exported", "diagnosing", "checking parity")
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("training", total=args.epochs + 3)

        def progress(line: str) -> None:
            bar.console.print(line, markup=False)
            if line.startswith(steps):
                bar.advance(task)
            bar.update(task, description=line.split("  ")[0][:50])

        result = demo(args.root, epochs=args.epochs, max_samples=args.max_samples, progress=progress)
    result.render(console)
    result.demo.parity.check()
    return 0


def cmd_run(args) -> int:
    from tfguard.attach import run_script

    console = _console(stderr=True)  # the script owns stdout
    options = dict(
        logdir=args.logdir,
        policy=args.policy,
        report=args.report,
        html=args.html,
        guard=not args.no_guard,
        logger=not args.no_logger,
        quarantine_dir=args.quarantine_dir,
        progress=None if args.quiet else (lambda line: console.print(line, markup=False)),
    )
    if args.try_fixes:
        from tfguard.remedies import try_script_fixes

        result = try_script_fixes(args.script, args.args, max_trials=args.max_trials,
                                  epochs_fraction=args.trial_epochs, **options)
    else:
        result = run_script(args.script, args.args, **options)
    result.render(console)
    return result.exit_code


ENDED_BADLY = ("failed", "out_of_memory", "aborted")


def _diagnosis_status(diagnoses) -> int:
    """1 when a run has an error finding or did not end well (failed, killed, interrupted)."""
    bad = any(d.status.get("state") in ENDED_BADLY for d in diagnoses)
    return 1 if bad or any(f.severity == "error" for d in diagnoses for f in d.findings) else 0


def _damage_status(damage, console: Console) -> int:
    """Says on stderr which event files lost data; 2 if any did, else 0."""
    lost = [d for d in damage if d.lost_data]
    if not lost:
        return 0
    first = lost[0]
    files = len({d.path for d in lost})
    more = f" (and {len(lost) - 1} more bad spot(s))" if len(lost) > 1 else ""
    console.print(Text.assemble(
        ("ERROR", "bold red"),
        f" {files} event file(s) damaged: {printable(first.path, newlines=False)} "
        f"at offset {first.offset}: {printable(first.reason, newlines=False)}{more}"))
    console.print(Text.assemble(
        ("hint:", "yellow"), " the intact records were read and diagnosed; each bad spot is a "
        "note of its run. Re-copy the logs, or remove the damaged file if it is not an event file"))
    return 2


def cmd_diagnose(args) -> int:
    from tfguard.diagnose import diagnose_logdir, render_terminal, to_json, write_html

    damage: list = []
    diagnoses = diagnose_logdir(args.logdir, damage=damage, keep_signals=bool(args.html))
    if args.html:
        write_html(diagnoses, args.html)
    if args.json:
        print(json.dumps(to_json(diagnoses), indent=2))
    else:
        render_terminal(diagnoses, _console())
    return max(_diagnosis_status(diagnoses), _damage_status(damage, _console(stderr=True)))


def cmd_compare(args) -> int:
    from tfguard.diagnose import compare_logdir, render_compare

    damage: list = []
    rows = compare_logdir(args.logdir, sort_by=args.sort_by, damage=damage)
    render_compare(rows, _console(), sort_by=args.sort_by)
    return _damage_status(damage, _console(stderr=True))


def cmd_report(args) -> int:
    from tfguard.diagnose import diagnose_logdir, write_html

    damage: list = []
    path = write_html(diagnose_logdir(args.logdir, damage=damage), args.output)
    _console().print(Text(f"report written: {printable(path, newlines=False)}"))
    return _damage_status(damage, _console(stderr=True))


def cmd_watch(args) -> int:
    from tfguard.watch import watch_logdir, watch_outputs

    outputs = watch_outputs(console=_console(), errors=_console(stderr=True), json=args.json,
                            webhooks=args.webhook, timeout=args.webhook_timeout,
                            wait=args.webhook_wait)
    result = watch_logdir(args.logdir, interval=args.interval, once=args.once,
                          exit_on=args.exit_on, settle=args.settle, outputs=outputs)
    return result.exit_code


def cmd_lint(args) -> int:
    from tfguard.lint import lint_saved_model, lint_to_json, render_lint

    findings = lint_saved_model(args.model)
    if args.json:
        print(lint_to_json(findings))
    else:
        render_lint(findings, _console())
    return 1 if any(f.severity == "error" for f in findings) else 0


# commands whose every OSError comes from a path given on the command line
_FILE_COMMANDS = ("compare", "diagnose", "lint", "report", "watch")

COMMANDS = {
    "compare": cmd_compare,
    "demo": cmd_demo,
    "diagnose": cmd_diagnose,
    "report": cmd_report,
    "lint": cmd_lint,
    "doctor": cmd_doctor,
    "export": cmd_export,
    "parity": cmd_parity,
    "replay": cmd_replay,
    "run": cmd_run,
    "train": cmd_train,
    "watch": cmd_watch,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfguard",
        description="Trustworthy, observable TensorFlow / Keras 3 training.",
    )
    parser.add_argument("--version", action="version", version=f"tfguard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("replay", help="re-run a quarantined batch and name the first bad layer/op")
    p.add_argument("path", help="a quarantine folder, e.g. tfguard-quarantine/<model>/batch-N")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="FILE.py",
                   help="a file defining the model's custom layers (repeatable)")

    p = sub.add_parser("demo", help="train the reference CNN offline, guarded and logged; diagnose; export")
    p.add_argument("--root", default="runs/demo", help="where logs, reports and exports go")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--max-samples", type=int, default=None)

    p = sub.add_parser("train", help="train a reference model (flags override --config TOML)")
    p.add_argument("--config", default=None, help="a TOML file with the same keys as the flags")
    p.add_argument("--data", default=None, help="digits | fashion_mnist | npz:PATH | dir:PATH")
    p.add_argument("--model", default=None, choices=["cnn", "mlp"])
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--learning-rate", type=float, default=None)
    p.add_argument("--optimizer", default=None, choices=["adam", "adamw", "sgd", "rmsprop"])
    p.add_argument("--augment", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--logdir", default=None)
    p.add_argument("--export-dir", default=None)
    p.add_argument("--max-samples", type=int, default=None)
    p.add_argument("--policy", default="skip", choices=["raise", "skip", "warn"])

    p = sub.add_parser("export", help="export a trained run: .keras, SavedModel, TFLite")
    p.add_argument("run_dir")
    p.add_argument("out", nargs="?", default=None)
    p.add_argument("--no-tflite", action="store_true")

    p = sub.add_parser("parity", help="Keras vs SavedModel vs TFLite on held-out samples")
    p.add_argument("export_dir")
    p.add_argument("--samples", type=int, default=256)

    p = sub.add_parser(
        "run",
        help="run an unmodified Keras script with the firewall, the logger and live diagnosis",
        description="Runs SCRIPT as `python SCRIPT ARGS...` would, with every keras.Model.fit "
        "guarded, logged and diagnosed; prints the diagnosis on stderr and exits with the "
        "script's status. Options go before SCRIPT; everything after it goes to the script.",
    )
    p.add_argument("--logdir", default="runs/attached", help="root of the event files (one run per fit)")
    p.add_argument("--report", default=None, help="JSON report (default: LOGDIR/report.json)")
    p.add_argument("--html", default=None, help="also write a self-contained HTML report (with --try-fixes: and the trials' curves)")
    p.add_argument("--policy", default="warn", choices=["raise", "skip", "warn"],
                   help="firewall policy (default warn: never raises, never applies a non-finite update)")
    p.add_argument("--quarantine-dir", default=None, help="where bad batches go (default: LOGDIR/quarantine)")
    p.add_argument("--no-guard", action="store_true", help="do not guard the models")
    p.add_argument("--no-logger", action="store_true", help="do not write TensorBoard event files")
    p.add_argument("--quiet", action="store_true", help="no tfguard lines while the script runs")
    p.add_argument("--try-fixes", action="store_true",
                   help="then re-run the script once per remedy of each warning/error finding "
                   "and report whether it measurably helped (logs in LOGDIR/try-N-REMEDY)")
    p.add_argument("--max-trials", type=int, default=None, metavar="N",
                   help="with --try-fixes: at most N trials (default: one per remedy)")
    p.add_argument("--trial-epochs", type=float, default=1.0, metavar="FRACTION",
                   help="with --try-fixes: train each trial for this fraction of the epochs (default 1)")
    p.add_argument("script", metavar="SCRIPT", help="the training script")
    p.add_argument("args", metavar="ARGS", nargs=argparse.REMAINDER, help="the script's arguments")

    p = sub.add_parser("diagnose", help="diagnose the runs of a log directory (tfguard or Keras logs)")
    p.add_argument("logdir")
    p.add_argument("--json", action="store_true", help="print the versioned JSON report")
    p.add_argument("--html", default=None, metavar="FILE", help="also write the HTML report")

    p = sub.add_parser("compare", help="one row per run: hparams, best and final metrics, findings")
    p.add_argument("logdir")
    p.add_argument("--sort-by", default=_tags.val("accuracy"), metavar="METRIC")

    p = sub.add_parser("report", help="write the self-contained HTML report of a log directory")
    p.add_argument("logdir")
    p.add_argument("-o", "--output", default="report.html", metavar="FILE")

    p = sub.add_parser(
        "watch", help="follow the event files of running jobs; say each new finding once",
        description="Follows LOGDIR (tfguard Logger or stock Keras TensorBoard logs) while jobs "
        "write it: reads only what was appended, diagnoses the runs that changed with the rules "
        "of `tfguard diagnose`, and says each new finding once (run, step, root cause, fix), and "
        "once when it goes away. Ctrl-C prints a one-line summary and exits 0.")
    p.add_argument("logdir")
    p.add_argument("--interval", type=float, default=None, metavar="SECONDS",
                   help="seconds between two looks at LOGDIR (default 5)")
    p.add_argument("--once", action="store_true", help="one pass, then exit (for cron)")
    p.add_argument("--exit-on", default=None, choices=["error", "warning"],
                   help="exit with status 1 at the first finding at least this bad")
    p.add_argument("--json", action="store_true",
                   help="one JSON line per event (schema tfguard.watch/1), for other tools")
    p.add_argument("--webhook", action="append", default=[], metavar="URL",
                   help="POST each event's JSON to URL, with retries (repeatable); a failing "
                   "webhook never stops the watch, errors are sent first, and an event not "
                   "delivered is said on stderr and makes the exit status 3")
    p.add_argument("--webhook-timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds one POST may take in all (default 5)")
    p.add_argument("--webhook-wait", type=float, default=None, metavar="SECONDS",
                   help="at the end (--once, Ctrl-C), wait this long at most for queued events "
                   "to be delivered (default 60)")
    p.add_argument("--settle", type=float, default=None, metavar="SECONDS",
                   help="report a damaged spot of an event file once it stayed bad this long "
                   "or the file stopped growing this long (default 150: TensorFlow's writers "
                   "flush every 120 s)")

    p = sub.add_parser("lint", help="static checks of a saved .keras model (activation vs loss)")
    p.add_argument("model", help="a .keras file (loaded with safe_mode=True)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("doctor", help="check versions, GPUs, two Kerases, XLA")
    p.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the `tfguard` command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    handler = getattr(args, "handler", None) or COMMANDS[args.command]
    try:
        return int(handler(args) or 0)
    except BrokenPipeError:
        return _closed_pipe()
    except TfguardError as error:
        _error(error.message, error.hint)
        return error.exit_code
    except OSError as error:
        if args.command not in _FILE_COMMANDS:
            raise
        # a file or folder the command was pointed at: one line, no traceback
        where = f" {printable(error.filename, newlines=False)!s}:" if error.filename else ""
        _error(f"{type(error).__name__}:{where} {error.strerror or error}",
               "check the path and its permissions")
        return 1
    except KeyboardInterrupt:
        _console(stderr=True).print(Text.assemble(("ERROR", "bold red"), " interrupted"))
        return 130


SIGPIPE_EXIT = 141
"""The exit status when stdout was closed by its reader (`tfguard diagnose ... | head`): 128 + SIGPIPE, as the shell reports a command killed by it."""


def _closed_pipe() -> int:
    """Stops writing to a stdout its reader closed, without a word (as `cat` in a pipe does)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush must not fail again
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return SIGPIPE_EXIT


def _error(message: str, hint: str | None) -> None:
    """Prints one red `ERROR` line, and the hint, on stderr; text is shown literally."""
    console = _console(stderr=True)
    console.print(Text.assemble(("ERROR", "bold red"), " ", printable(message)))
    if hint:
        console.print(Text.assemble(("hint:", "yellow"), " ", printable(hint)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
