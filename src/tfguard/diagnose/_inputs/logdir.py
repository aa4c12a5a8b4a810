"""`load_signals` and `iter_signals`: read a log directory into one normalized `Signals` per run.

Reads the event files with `tfguard.events.read_run` (scalars,
histograms, texts and hparams; images are not read) and normalizes each run
(tfguard's layout or the stock Keras callback's, see
`tfguard.diagnose._inputs.normalize`). Damage is never hidden: every bad spot
of an event file becomes a note of its run, and a run whose files held
nothing readable (a file damaged from its first byte) is still listed, with
only those notes, so the report names the file and the offset.

The logdir is read one *family* at a time (`run_families`: a run folder,
or a Keras run's parent with its `train/` and `validation/`), so
`iter_signals` holds one family's values at a time whatever the number of
runs; `load_signals` gathers them all.

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
from collections.abc import Callable, Iterable, Iterator, Mapping

from tfguard.diagnose._inputs.normalize import _notes, run_family, signals_from_runs
from tfguard.diagnose._inputs.signals import Signals

__all__ = ["iter_signals", "load_family", "load_signals", "root_name", "run_families"]

_KINDS = ("scalars", "histograms", "texts", "hparams")


def root_name(logdir: str | os.PathLike) -> str:
    """The name of the logdir itself in reports (its base name, `"."` for `/`)."""
    return os.path.basename(os.path.normpath(os.fspath(logdir))) or "."


def run_families(names: Iterable[str]) -> dict[str, list[str]]:
    """The run folders grouped by the run they make (`run_family`), families and members sorted.

    Example:

    >>> run_families(["b", "a/train", "a/validation", "a"])
    {'a': ['a', 'a/train', 'a/validation'], 'b': ['b']}
    """
    groups: dict[str, list[str]] = {}
    for name in sorted(names):
        groups.setdefault(run_family(name), []).append(name)
    return dict(sorted(groups.items()))


def _signals(runs: Mapping[str, object], root: str, lint, damage: list | None) -> list[Signals]:
    """The normalized runs of `runs` (read folders), with a notes-only run for each unreadable one."""
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


def load_family(logdir: str | os.PathLike, members: Iterable[str], *, lint=None,
                damage: list | None = None) -> list[Signals]:
    """Reads and normalizes the run folders of one family (see `run_families`).

    Args:
        logdir: the log directory.
        members: the family's run folders, relative to `logdir`.
        lint: static findings to attach (a list for every run, or run name ->
            list). Defaults to `None`.
        damage: a list that receives every `tfguard.events.Damage` found.
            Defaults to `None`.

    Returns:
        The family's runs' signals, in run-name order.
    """
    from tfguard.events import read_run

    logdir = os.fspath(logdir)
    runs = {name: read_run(os.path.normpath(os.path.join(logdir, name)), kinds=_KINDS, name=name)
            for name in members}
    return _signals(runs, root_name(logdir), lint, damage)


def iter_signals(logdir: str | os.PathLike, *, lint: list | Mapping | None = None,
                 damage: list | None = None) -> Iterator[Signals]:
    """Yields the signals of every run, one family read at a time, in family-name order.

    Args:
        logdir: the folder TensorBoard would be pointed at.
        lint: static findings to attach. Defaults to `None`.
        damage: a list that receives every `tfguard.events.Damage` found.
            Defaults to `None`.

    Raises:
        EventFileError: if `logdir` does not exist or is not a directory.
    """
    from tfguard.events import find_runs

    for members in run_families(find_runs(logdir)).values():
        yield from load_family(logdir, members, lint=lint, damage=damage)


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
        reader: a function like `tfguard.events.read_logdir`, called once
            for the whole logdir. Defaults to `None` (`iter_signals`: one
            family at a time).
        damage: a list that receives every `tfguard.events.Damage` found
            in the files. Defaults to `None`.

    Returns:
        The runs' signals, in run-name order; a run whose files are damaged
        and held nothing readable gets a `Signals` with only its notes.

    Raises:
        EventFileError: if `logdir` does not exist or is not a directory.
    """
    if reader is None:
        found = list(iter_signals(logdir, lint=lint, damage=damage))
    else:
        found = _signals(reader(logdir, kinds=_KINDS), root_name(logdir), lint, damage)
    return sorted(found, key=lambda s: s.run)
