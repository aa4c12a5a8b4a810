"""`load_signals`: read a log directory into one normalized `Signals` per run.

Reads the event files with `tfguard.events.read_logdir` (scalars,
histograms, texts and hparams; images are not read) and normalizes each run
(tfguard's layout or the stock Keras callback's, see
`tfguard.diagnose.inputs.normalize`). Damage is never hidden: every bad spot
of an event file becomes a note of its run, and a run whose files held
nothing readable (a file damaged from its first byte) is still listed, with
only those notes, so the report names the file and the offset.

Example:

>>> import tempfile
>>> import tensorflow as tf
>>> logdir = tempfile.mkdtemp()
>>> with tf.summary.create_file_writer(logdir + "/lr_0.1").as_default():
...     _ = tf.summary.scalar("train/loss", 2.3, step=10)
>>> [(s.run, sorted(s.scalars)) for s in load_signals(logdir)]
[('lr_0.1', ['train/loss'])]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from tfguard.diagnose.inputs.normalize import _notes, signals_from_runs
from tfguard.diagnose.inputs.signals import Signals

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


__all__ = ["load_signals"]
