"""Run the trials: the original once, then one re-run per remedy, one after another.

`try_script_fixes` is `tfguard run --try-fixes SCRIPT [ARGS]`: it runs the
script attached (`tfguard.attach.run_script`, writing the usual report and
logs), plans a trial for each warning/error finding that has a remedy
(`tfguard.remedies.plan`), and re-runs the script once per remedy with that
one remedy applied through an `Intercept` (never by editing the script).
Each trial logs into its own folder `<logdir>/try-<n>-<remedy>/`, so
`tfguard compare <logdir>` lists the trials beside the original; its
report is `report.json` there, and the script's output during a trial goes
to `output.txt` there rather than to the terminal. The trials are added to
the original report as its `trials` list, and to its HTML report (`--html`)
as its "Tried fixes" section, each trial's curves overlaid on the original's
(the page is written once, after the trials).

`try_fixes` is the same for a notebook: it takes a zero-argument training
callable that builds, compiles and fits a *new* model on each call, runs it
once attached to learn the findings (or takes the findings given) and the
original measure, then once per remedy; `Trials.write_html(path)` writes
the original run's HTML report with the trials' section.

Every run (the original and each trial) starts from the same random seed
(`keras.utils.set_random_seed(seed)`), so a trial differs from the
original by its remedy, not by its draw of initial weights.

Example:

>>> import keras, numpy as np
>>> def train():
...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
...     model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
...     model.fit(np.ones((16, 2)), np.ones((16, 1)), epochs=2, verbose=0)
>>> noop = Remedy("noop", "no_learning", "nothing", on_fit=lambda s, m, a: s.changed("nothing"))
>>> result = try_fixes(train, remedies=[noop])
>>> [(t.remedy, t.verdict) for t in result]
[('noop', 'no better')]
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence

import keras

from tfguard._errors import ContractError
from tfguard._files import unique_path
from tfguard._findings import Finding
from tfguard.attach import DEFAULT_LOGDIR, DEFAULT_POLICY, AttachSession, run_script, write_report
from tfguard.diagnose import write_html
from tfguard.diagnose._causes import by_measured_fix
from tfguard.remedies._catalogue import PER_FINDING, Remedy, plan
from tfguard.remedies._intercept import Intercept
from tfguard.remedies._measure import DEFAULT_MARGIN, measure_name
from tfguard.remedies._render import render_trials
from tfguard.remedies._trial import Trial, judge, run_curve

DEFAULT_SEED = 0


@dataclasses.dataclass
class Trials:
    """The trials of one original run (a sequence of `Trial`).

    Args:
        trials: the `Trial`s, in the order they ran.
        findings: the findings the trials answer.
        measure: the measure's name on the original run.
        before: the original run's curves (`{key: [per epoch]}`).
        notes: remarks (the original run failed, ...).
        diagnoses: the original run's diagnoses (what `write_html` shows
            beside the trials). Defaults to `[]`.
    """

    trials: list[Trial]
    findings: list = dataclasses.field(default_factory=list)
    measure: str = "loss"
    before: dict = dataclasses.field(default_factory=dict)
    notes: list = dataclasses.field(default_factory=list)
    diagnoses: list = dataclasses.field(default_factory=list)

    def __iter__(self):
        return iter(self.trials)

    def __len__(self) -> int:
        return len(self.trials)

    def __getitem__(self, index):
        return self.trials[index]

    @property
    def fixes(self) -> list[Trial]:
        """The trials whose numbers show an improvement."""
        return [t for t in self.trials if t.fix]

    def to_json(self) -> list[dict]:
        """The `trials` list of the JSON report."""
        return [t.to_dict() for t in self.trials]

    def render(self, console) -> None:
        """The table of trials on a rich console."""
        render_trials(self.trials, console, notes=self.notes)

    def write_html(self, path: str | os.PathLike, *, title: str = "tfguard try-fixes") -> str:
        """Writes the original run's HTML report with the "Tried fixes" section; returns the path."""
        return write_html(self.diagnoses, path, title=title, trials=self.to_json())


@dataclasses.dataclass
class ScriptTrials:
    """What `tfguard run --try-fixes` saw: the original `AttachResult` and the `Trials`."""

    result: object
    trials: Trials

    @property
    def exit_code(self) -> int:
        """The original run's exit status (trials never change it)."""
        return self.result.exit_code

    def render(self, console) -> None:
        """The original run's diagnosis, then the table of trials."""
        self.result.render(console)
        self.trials.render(console)


def seed_everything(seed: int | None) -> None:
    """`keras.utils.set_random_seed(seed)` (Python, numpy and TensorFlow), unless `seed` is `None`."""
    if seed is not None:
        keras.utils.set_random_seed(int(seed))


def locator(original: Intercept) -> Callable[[str], tuple | None]:
    """`where -> (model ordinal, layer index)` in the original run, for aiming a remedy at a layer.

    Example:

    >>> import keras
    >>> with Intercept() as seen:
    ...     m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, name="hid"),
    ...                           keras.layers.Dense(1, name="out")])
    ...     m.compile(optimizer="sgd", loss="mse")
    >>> locator(seen)("out/kernel"), locator(seen)("nowhere")
    ((0, 1), None)
    """
    def locate(where: str) -> tuple | None:
        name = str(where).split("/")[0]
        for ordinal, model in enumerate(original.models):
            for index, layer in enumerate(getattr(model, "layers", [])):
                if layer.name == name:
                    return ordinal, index
        return None
    return locate


def short_error(error: BaseException) -> str:
    """`"<type>: <the line that says what went wrong>"`, for a note.

    TensorFlow's errors open with "Graph execution error:" and a stack; the
    line that explains them comes last.

    Example:

    >>> short_error(ValueError("Graph execution error:\\n  File x\\nlabel 10 out of range\\n [[node]]"))
    'ValueError: label 10 out of range'
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("[[", "File ", "Detected at", "Graph execution"))]
    text = useful[-1] if len(lines) > 1 and useful else (lines[0] if lines else "")
    return f"{type(error).__name__}: {text[:300]}"


def _alarm_findings(diagnoses: Iterable) -> list[Finding]:
    return [f for d in diagnoses for f in d.findings]


def _pairs(findings, remedies, per_finding, locate, max_trials):
    if remedies is None:
        return plan(findings, per_finding=per_finding, locate=locate, max_trials=max_trials)
    by_id = {f.id: f for f in findings}
    pairs = [(by_id.get(r.answers) or Finding(r.answers, "warning", "given remedy"), r)
             for r in remedies]
    return pairs[:max_trials] if max_trials is not None else pairs


def _say(progress, line: str) -> None:
    if progress is not None:
        progress(line)


def _verdict_line(i: int, n: int, trial: Trial) -> str:
    return (f"tfguard: trial {i}/{n} {trial.change}: {trial.measure} {trial.before:.4g} → "
            f"{trial.after:.4g}: {trial.verdict}")


def try_fixes(
    train: Callable[[], object],
    findings: Iterable | None = None,
    *,
    remedies: Sequence[Remedy] | None = None,
    logdir: str | os.PathLike | None = None,
    margin: float = DEFAULT_MARGIN,
    epochs_fraction: float = 1.0,
    seed: int | None = DEFAULT_SEED,
    per_finding: int = PER_FINDING,
    max_trials: int | None = None,
    policy: str = DEFAULT_POLICY,
    guard: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Trials:
    """Tries each finding's remedies on a training callable; returns the measured `Trials`.

    Example:

    >>> # result = tfguard.try_fixes(train)   # train() builds, compiles and fits a new model
    >>> # [(t.change, t.before, t.after, t.verdict) for t in result]

    Args:
        train: a zero-argument callable that builds, compiles and fits a new
            model each time it is called (its return value is ignored).
        findings: the findings to answer (`Finding`s, their dicts, or
            `Diagnosis` objects). Defaults to `None`: those of the original
            run, which this function makes attached.
        remedies: try exactly these `Remedy`s instead of the catalogue's.
            Defaults to `None`.
        logdir: where the original run (`original/`) and each trial
            (`try-<n>-<remedy>/`) write TensorBoard logs. Defaults to `None`
            (no logs).
        margin: the relative change of the measure a verdict needs. Defaults to `0.05`.
        epochs_fraction: train each trial for this fraction of the epochs. Defaults to `1.0`.
        seed: the random seed every run starts from (`None`: leave the
            seed alone). Defaults to `0`.
        per_finding: remedies tried per finding. Defaults to `2`.
        max_trials: the most trials. Defaults to `None` (no limit).
        policy: the firewall's policy during the runs. Defaults to `"warn"`.
        guard: turn the firewall on. Defaults to `True`.
        progress: receives one line per trial. Defaults to `None`.

    Returns:
        The `Trials`, one per remedy tried, in order.

    Raises:
        ContractError: if `train` is not callable, or fits the same model
            object in two runs (it must build a new one each call).
    """
    if not callable(train):
        raise ContractError("Received an invalid value for `train`, expected a zero-argument "
                            f"callable that builds, compiles and fits a model. Received: train={train!r}")
    root = os.path.abspath(os.fspath(logdir)) if logdir is not None else None
    with tempfile.TemporaryDirectory(prefix="tfguard-trials-") as scratch:
        def run(remedy, folder, fraction=1.0, hparams=None, refuse=()):
            seed_everything(seed)
            error = None
            with Intercept(remedy, epochs_fraction=fraction, refuse=refuse) as seen, AttachSession(
                    logdir=folder or scratch, logger=folder is not None, guard=guard, policy=policy,
                    quarantine_dir=os.path.join(folder or scratch, "quarantine"),
                    hparams=hparams) as session:
                try:
                    train()
                except ContractError:
                    raise
                except Exception as failure:  # the trial's result says so
                    error = short_error(failure)
            return seen, session, error

        original, session, error = run(None, os.path.join(root, "original") if root else None)
        notes = [f"the original run failed: {error}"] if error else []
        if findings is None:
            findings = _alarm_findings(session.diagnoses)
        else:
            findings = _as_findings(findings)
        pairs = _pairs(findings, remedies, per_finding, locator(original), max_trials)
        trials = []
        for i, (finding, remedy) in enumerate(pairs, 1):
            folder = unique_path(root, f"try-{i}-{remedy.key}") if root else None
            start = time.perf_counter()
            seen, _, failed = run(remedy, folder, epochs_fraction, {"remedy": remedy.key},
                                  refuse=original.models + [f.model for f in original.fits])
            trial = judge(finding, remedy, original, seen, margin=margin, run_dir=folder,
                          error=failed, seconds=time.perf_counter() - start)
            trials.append(trial)
            _say(progress, _verdict_line(i, len(pairs), trial))
    curve = run_curve(original.fits)[0]
    return Trials(trials, findings=list(findings), measure=measure_name(curve) if curve else "loss",
                  before=curve, notes=notes, diagnoses=list(session.diagnoses))


def _as_findings(items: Iterable) -> list[Finding]:
    out = []
    for item in items:
        if hasattr(item, "findings"):  # a Diagnosis
            out.extend(item.findings)
        elif isinstance(item, dict):
            out.append(Finding.from_dict(item))
        else:
            out.append(item)
    return out


def try_script_fixes(
    path: str | os.PathLike,
    args: Sequence[str] = (),
    *,
    logdir: str | os.PathLike = DEFAULT_LOGDIR,
    report: str | os.PathLike | None = None,
    html: str | os.PathLike | None = None,
    policy: str = DEFAULT_POLICY,
    guard: bool = True,
    logger: bool = True,
    quarantine_dir: str | os.PathLike | None = None,
    progress: Callable[[str], None] | None = None,
    remedies: Sequence[Remedy] | None = None,
    margin: float = DEFAULT_MARGIN,
    epochs_fraction: float = 1.0,
    seed: int | None = DEFAULT_SEED,
    per_finding: int = PER_FINDING,
    max_trials: int | None = None,
) -> ScriptTrials:
    """`tfguard run --try-fixes`: the attached run, then one re-run of the script per remedy.

    Example:

    >>> # outcome = try_script_fixes("train.py", ["--epochs", "5"], logdir="runs/x")
    >>> # [(t.change, t.verdict) for t in outcome.trials], outcome.exit_code

    Args:
        path: the script.
        args: its arguments. Defaults to `()`.
        logdir: the root of the logs; trials go to `<logdir>/try-<n>-<remedy>/`.
            Defaults to `"runs/attached"`.
        report: the original run's JSON report, which gets the `trials` list.
            Defaults to `None` (`<logdir>/report.json`).
        html: the original run's HTML report, which gets the "Tried fixes"
            section. Defaults to `None` (none).
        policy: the firewall's policy. Defaults to `"warn"`.
        guard: turn the firewall on. Defaults to `True`.
        logger: write TensorBoard logs. Defaults to `True`.
        quarantine_dir: the original run's quarantine. Defaults to `None`.
        progress: receives the original run's lines and one line per trial.
            Defaults to `None`.
        remedies: try exactly these `Remedy`s. Defaults to `None` (the catalogue's).
        margin: the verdict's relative margin. Defaults to `0.05`.
        epochs_fraction: train each trial for this fraction of the epochs. Defaults to `1.0`.
        seed: the random seed every run starts from. Defaults to `0`.
        per_finding: remedies tried per finding. Defaults to `2`.
        max_trials: the most trials. Defaults to `None` (no limit).

    Returns:
        A `ScriptTrials`.

    Raises:
        ScriptError: if `path` is not a file.
        ContractError: for an invalid `policy`.
    """
    logdir = os.path.abspath(os.fspath(logdir))
    html = os.path.abspath(os.fspath(html)) if html is not None else None  # before the script's chdir
    seed_everything(seed)
    with Intercept() as original:
        result = run_script(path, args, logdir=logdir, policy=policy, report=report, html=None,
                            guard=guard, logger=logger, quarantine_dir=quarantine_dir,
                            progress=progress)
    findings = _alarm_findings(result.diagnoses)
    pairs = _pairs(findings, remedies, per_finding, locator(original), max_trials)
    trials = []
    for i, (finding, remedy) in enumerate(pairs, 1):
        folder = unique_path(logdir, f"try-{i}-{remedy.key}")
        _say(progress, f"tfguard: trial {i}/{len(pairs)} for {finding.id}: {remedy.title}")
        start = time.perf_counter()
        seed_everything(seed)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "output.txt"), "w", encoding="utf-8") as out, \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), \
                Intercept(remedy, epochs_fraction=epochs_fraction) as seen:
            run = run_script(path, args, logdir=folder, policy=policy,
                             report=os.path.join(folder, "report.json"), guard=guard,
                             logger=logger, hparams={"remedy": remedy.key})
        failed = short_error(run.exception) if run.exception is not None else None
        trial = judge(finding, remedy, original, seen, margin=margin, run_dir=folder,
                      error=failed, seconds=time.perf_counter() - start)
        trials.append(trial)
        _say(progress, _verdict_line(i, len(pairs), trial))
    for diagnosis in result.diagnoses:  # the measured winner decides which cause is listed first
        diagnosis.findings = by_measured_fix(diagnosis.findings, trials)
    curve = run_curve(original.fits)[0]
    outcome = Trials(trials, findings=findings, measure=measure_name(curve) if curve else "loss",
                     before=curve, diagnoses=list(result.diagnoses))
    if result.report_path:
        _add_to_report(result.report_path, outcome, result.notes)
    if html is not None:  # written once, after the trials, with their section
        result.html_path = _write_html(html, outcome, f"tfguard run {os.path.basename(path)}",
                                       result.notes)
    return ScriptTrials(result, outcome)


def _add_to_report(path: str, trials: Trials, notes: list) -> None:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        doc["trials"] = trials.to_json()
        write_report(doc, path)
    except (OSError, ValueError) as error:  # the trials are still on the terminal
        notes.append(f"the trials could not be added to the JSON report: {error}")


def _write_html(path: str, trials: Trials, title: str, notes: list) -> str | None:
    try:
        return trials.write_html(path, title=title)
    except (OSError, ValueError) as error:  # the trials are still on the terminal and in the JSON
        notes.append(f"the HTML report could not be written: {error}")
        return None


__all__ = ["DEFAULT_SEED", "ScriptTrials", "Trials", "locator", "seed_everything", "short_error",
           "try_fixes", "try_script_fixes"]
