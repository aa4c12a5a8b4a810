"""`diagnose_logdir`: read a log directory and diagnose every run in it.

Reads the event files with `tfguard.events.read_logdir`, normalizes each
run (tfguard's layout or the stock Keras callback's, see
`tfguard.diagnose.normalize`) and runs the rules. Images are not read.

Damage is never hidden: every bad spot of an event file becomes a note of
its run, and a run whose files held nothing readable (a file damaged from
its first byte) is still listed, with only those notes, so the report names
the file and the offset. Pass a list as `damage` to get the
`tfguard.events.Damage` records themselves (the CLI's exit status).

Example:

>>> import tempfile
>>> import tensorflow as tf
>>> from tfguard.diagnose import diagnose_logdir
>>> logdir = tempfile.mkdtemp()
>>> with tf.summary.create_file_writer(logdir + "/lr_0.1").as_default():
...     for epoch in range(5):
...         _ = tf.summary.scalar("train/loss", 2.3, step=10 * (epoch + 1))
>>> [(d.run, d.ids) for d in diagnose_logdir(logdir)]
[('lr_0.1', ['no_learning'])]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping

from tfguard.diagnose.engine import Diagnosis, diagnose
from tfguard.diagnose.normalize import _notes, signals_from_runs
from tfguard.diagnose.rules import Rule
from tfguard.diagnose.signals import Signals
from tfguard.diagnose.thresholds import Thresholds

_KINDS = ("scalars", "histograms", "texts", "hparams")


def load_signals(
    logdir: str | os.PathLike,
    *,
    lint: list | Mapping | None = None,
    reader: Callable | None = None,
    damage: list | None = None,
) -> list[Signals]:
    """Reads a log directory into one `Signals` per run.

    Example:

    >>> import tempfile
    >>> load_signals(tempfile.mkdtemp())
    []

    Args:
        logdir: the folder TensorBoard would be pointed at.
        lint: static findings to attach (a list for every run, or run name ->
            list). Defaults to `None`.
        reader: a function like `tfguard.events.read_logdir`. Defaults to
            `None` (that function).
        damage: a list that receives every `tfguard.events.Damage` found
            in the files. Defaults to `None`.

    Returns:
        The runs' signals, in run-name order; a run whose files are damaged
        and held nothing readable gets a `Signals` with only its notes.

    Raises:
        EventFileError: if `logdir` does not exist or is not a directory.
    """
    if reader is None:
        from tfguard.events import read_logdir as reader
    runs = reader(logdir, kinds=_KINDS)
    root = os.path.basename(os.path.normpath(os.fspath(logdir))) or "."
    signals = signals_from_runs(runs, root_name=root, lint=lint)
    shown = {note for s in signals for note in s.notes}
    for name, run in runs.items():
        found = list(getattr(run, "damage", ()))
        if damage is not None:
            damage.extend(found)
        notes = _notes(run)
        if found and not shown.issuperset(notes):  # left out: nothing readable in it
            signals.append(Signals(run=root if name == "." else name, source="tfguard",
                                   notes=notes, path=getattr(run, "path", None)))
    return sorted(signals, key=lambda s: s.run)


def diagnose_logdir(
    logdir: str | os.PathLike,
    *,
    rules: Iterable[str | Rule] | None = None,
    thresholds: Thresholds | Mapping | None = None,
    lint: list | Mapping | None = None,
    reader: Callable | None = None,
    damage: list | None = None,
) -> list[Diagnosis]:
    """Diagnoses every run under a log directory.

    Example:

    >>> import tempfile
    >>> diagnose_logdir(tempfile.mkdtemp())
    []

    Args:
        logdir: the folder TensorBoard would be pointed at.
        rules: rule ids or `Rule` objects. Defaults to `None` (all rules).
        thresholds: a `Thresholds` or a mapping of overrides. Defaults to `None`.
        lint: static findings (e.g. of `tfguard.lint` on the input pipeline)
            to attach: a list for every run, or run name -> list. Defaults to `None`.
        reader: a function like `tfguard.events.read_logdir`. Defaults to `None`.
        damage: a list that receives every `tfguard.events.Damage` found
            in the files. Defaults to `None`.

    Returns:
        One `Diagnosis` per run, in run-name order (damage shows in `notes`).

    Raises:
        EventFileError: if `logdir` does not exist or is not a directory.
        ContractError: for an unknown rule id or threshold name.
    """
    return [diagnose(s, rules=rules, thresholds=thresholds)
            for s in load_signals(logdir, lint=lint, reader=reader, damage=damage)]
