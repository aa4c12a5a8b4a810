"""`run_script`: run an unmodified Keras training script as `python SCRIPT` would, attached.

The script runs in this process with `runpy.run_path(path,
run_name="__main__")` inside an `AttachSession`, so every `fit()` in it is
guarded, logged and diagnosed. It sees what `python SCRIPT ARGS...` gives
it: `sys.argv == [SCRIPT, *ARGS]`, `__name__ == "__main__"`, `__file__`
its absolute path, and its (real) directory first on `sys.path`. Its
stdout and stderr are not touched. `sys.argv` and `sys.path` are restored
afterwards (the modules it imported stay imported).

The exit status is the one Python would give: `sys.exit(n)` gives `n`,
`sys.exit(None)` or the end of the script 0, `sys.exit("text")` 1 (the
text is kept in `AttachResult.exit_message` for the caller to print), an
uncaught exception 1 with the traceback as Python prints it (frames of
tfguard and runpy removed), `KeyboardInterrupt` 130. One exception to the
rule: a `GuardViolation` (policy `"raise"`) that the script does not catch
gives `GuardViolation.exit_code` (3), like every other tfguard command, so
a CI job can tell "tfguard stopped the training" from "the script failed".

The report (JSON, `tfguard.attach._report`) and the HTML page are written
in every case, also after `sys.exit` or an exception. The library prints
nothing; `AttachResult.render` is for the CLI.

Why the default policy is `"warn"`: attaching must change the script's
behaviour as little as possible. `"raise"` turns a bad step into an
exception the script never raised; `"skip"` refuses every update that
fails a check, even a finite one, and stops the training after
`max_consecutive_skips` skips. `"warn"` never raises and applies every
update the script would have applied, except one whose loss or gradients
are non-finite, which would have turned the weights into NaN for good (and
made every later number of the run meaningless). So a healthy script runs
exactly as before, and a broken one keeps finite weights while every
violation is recorded.

Example:

>>> # result = run_script("train.py", ["--epochs", "3"], report="runs/attached/report.json")
>>> # result.exit_code, [d.ids for d in result.diagnoses]
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import runpy
import sys
import traceback
import types
from collections.abc import Callable, Sequence

from tfguard._errors import GuardViolation, TfguardError
from tfguard.attach._render import render_result
from tfguard.attach._report import attach_report, write_report
from tfguard.attach._session import DEFAULT_LOGDIR, DEFAULT_POLICY, AttachSession
from tfguard.diagnose import write_html

INTERRUPTED = 130  # the status a shell reports for a SIGINT-ed Python
_ATTACH_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class ScriptError(TfguardError):
    """The script to run cannot be found or is not a file."""

    exit_code = 2


@dataclasses.dataclass
class AttachResult:
    """What `run_script` saw.

    Args:
        exit_code: the exit status `python SCRIPT` would have given (see the module).
        diagnoses: one `Diagnosis` per `fit()` call, in call order.
        report_path: the JSON report written, or `None`.
        html_path: the HTML report written, or `None`.
        logdir: the root of the event files, or `None` without logger.
        script: the script as given.
        argv: `sys.argv` inside the script.
        fits: the session's `FitRecord`s.
        guard_events: `(run, GuardEvent)` for every firewall violation.
        exception: the exception the script did not catch, or `None`.
        traceback: that exception formatted as Python prints it, or `None`.
        exit_message: the text of `sys.exit("text")`, or `None`.
        notes: remarks (no logger, a report that could not be written, ...).
    """

    exit_code: int
    diagnoses: list
    report_path: str | None
    html_path: str | None
    logdir: str | None
    script: str = ""
    argv: list = dataclasses.field(default_factory=list)
    fits: list = dataclasses.field(default_factory=list)
    guard_events: list = dataclasses.field(default_factory=list)
    exception: BaseException | None = None
    traceback: str | None = None
    exit_message: str | None = None
    notes: list = dataclasses.field(default_factory=list)

    def render(self, console) -> None:
        """Prints the script's end (traceback or exit text) and the diagnosis on a rich console."""

        render_result(self, console)


def exit_status(code) -> tuple[int, str | None]:
    """The exit status and message of `SystemExit(code)`, as Python maps them.

    Example:

    >>> exit_status(None), exit_status(3), exit_status("bad input")
    ((0, None), (3, None), (1, 'bad input'))

    Args:
        code: `SystemExit.code`.

    Returns:
        `(status, message)`; `message` is what Python would print on stderr, or `None`.
    """
    if code is None:
        return 0, None
    if isinstance(code, int):
        return int(code), None
    return 1, str(code)


def script_traceback(error: BaseException, filename: str) -> str:
    """The traceback text of an exception the script raised, starting at the script's frame.

    Example:

    >>> try:
    ...     raise ValueError("boom")
    ... except ValueError as e:
    ...     text = script_traceback(e, "no-such-file.py")
    >>> text.splitlines()[-1]
    'ValueError: boom'

    Args:
        error: the exception.
        filename: the script's absolute path (frames before its first frame
            are tfguard's and runpy's, and are dropped, as are the frames of
            the session's `fit` wrapper).

    Returns:
        The text Python's default `sys.excepthook` would print.
    """
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    frames = []
    while tb is not None:  # the session's fit wrapper is not the script's: hide it
        if not tb.tb_frame.f_code.co_filename.startswith(_ATTACH_DIR):
            frames.append(tb)
        tb = tb.tb_next
    chain = None
    for frame in reversed(frames):
        chain = types.TracebackType(chain, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
    return "".join(traceback.format_exception(type(error), error, chain))


@contextlib.contextmanager
def script_environment(path: str, argv: Sequence[str]):
    """Sets `sys.argv` and `sys.path[0]` as `python SCRIPT` would, and restores them.

    Example:

    >>> import sys
    >>> with script_environment("/tmp/x/train.py", ["train.py", "-v"]):
    ...     sys.argv, sys.path[0]
    (['train.py', '-v'], '/tmp/x')

    Args:
        path: the script's path.
        argv: `sys.argv` for the script.
    """
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.realpath(path)))
    try:
        yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


def _execute(path: str) -> tuple[int, BaseException | None, str | None, str | None]:
    """Runs the script; returns `(status, uncaught exception, traceback, exit message)`."""
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as stop:
        status, message = exit_status(stop.code)
        return status, None, None, message
    except KeyboardInterrupt as error:
        return INTERRUPTED, error, script_traceback(error, path), None
    except GuardViolation as error:
        return error.exit_code, error, script_traceback(error, path), None
    except BaseException as error:  # the script's own failure: reported, not propagated
        return 1, error, script_traceback(error, path), None
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0, None, None, None


def run_script(
    path: str | os.PathLike,
    args: Sequence[str] = (),
    *,
    logdir: str | os.PathLike = DEFAULT_LOGDIR,
    policy: str = DEFAULT_POLICY,
    report: str | os.PathLike | None = None,
    html: str | os.PathLike | None = None,
    guard: bool = True,
    logger: bool = True,
    quarantine_dir: str | os.PathLike | None = None,
    progress: Callable[[str], None] | None = None,
    hparams: dict | None = None,
) -> AttachResult:
    """Runs a Keras training script with the firewall, the logger and live diagnosis attached.

    Example:

    >>> # result = run_script("train.py", ["--lr", "0.1"], html="report.html")
    >>> # sys.exit(result.exit_code)

    Args:
        path: the script.
        args: the script's arguments (`sys.argv[1:]` inside it). Defaults to `()`.
        logdir: the root of the event files (one folder per fit). Defaults to
            `"runs/attached"`.
        policy: the firewall's policy (see the module for why `"warn"`).
            Defaults to `"warn"`.
        report: the JSON report to write. Defaults to `None`
            (`<logdir>/report.json`).
        html: the HTML report to write. Defaults to `None` (none).
        guard: turn the firewall on. Defaults to `True`.
        logger: write TensorBoard event files. Defaults to `True`.
        quarantine_dir: where bad batches go. Defaults to `None`
            (`<logdir>/quarantine`).
        progress: receives one line per new symptom or early guard event
            while the script trains. Defaults to `None`.
        hparams: extra hyperparameters for every run (e.g. the remedy a
            trial applied). Defaults to `None`.

    Returns:
        An `AttachResult`.

    Raises:
        ScriptError: if `path` is not a file.
        ContractError: for an invalid `policy`.
    """
    given = os.fspath(path)
    script = os.path.abspath(given)
    if not os.path.isfile(script):
        raise ScriptError(
            f"Received an invalid value for `path`, expected a Python script file. Received: path={given!r}",
            hint="give the path of the training script, e.g. `tfguard run train.py --epochs 3`",
        )
    # Absolute now: a script that changes directory must not move the outputs.
    logdir = os.path.abspath(os.fspath(logdir))
    report = os.path.abspath(os.fspath(report) if report is not None
                             else os.path.join(logdir, "report.json"))
    html = os.path.abspath(os.fspath(html)) if html is not None else None
    argv = [given, *(str(a) for a in args)]
    session = AttachSession(logdir=logdir, policy=policy, guard=guard, logger=logger,
                            quarantine_dir=quarantine_dir, progress=progress,
                            hparams={"script": os.path.basename(script), **(hparams or {})})
    with session, script_environment(script, argv):
        status, error, text, message = _execute(script)
    notes = list(session.notes)
    if not session.fits:
        notes.append("the script called no keras.Model.fit: nothing was diagnosed")
    doc = attach_report(session.fits, script=given, argv=argv, exit_code=status, error=error,
                        logdir=logdir if logger else None, notes=notes)
    report_path = _write(lambda: write_report(doc, report), "JSON report", notes)
    html_path = None
    if html is not None:

        html_path = _write(lambda: write_html(session.diagnoses, html,
                                              title=f"tfguard run {os.path.basename(script)}"),
                           "HTML report", notes)
    return AttachResult(
        exit_code=status, diagnoses=session.diagnoses, report_path=report_path,
        html_path=html_path, logdir=logdir if logger else None, script=given, argv=argv,
        fits=list(session.fits), guard_events=session.guard_events, exception=error,
        traceback=text, exit_message=message, notes=notes,
    )


def _write(write: Callable[[], str], what: str, notes: list) -> str | None:
    try:
        return write()
    except (OSError, ValueError) as error:  # the script's exit status stands
        notes.append(f"the {what} could not be written: {error}")
        return None


__all__ = ["INTERRUPTED", "AttachResult", "ScriptError", "exit_status", "run_script",
           "script_environment", "script_traceback"]
