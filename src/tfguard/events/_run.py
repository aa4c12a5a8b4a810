"""One run: the values of the event files in one directory, and `read_run`.

A run is a directory that directly contains `*tfevents*` files (TensorBoard's
definition). Its files are read in the order of the timestamp in their names
(`events.out.tfevents.<seconds>.<host>...`), then by name, so a resumed run's
later file wins where steps repeat; a `SessionLog.START` event at step S
that is not the run's first (a run resumed from a checkpoint) drops what was
read before it at steps >= S, as TensorBoard's purge of orphaned data does.

Example:

>>> import tempfile
>>> import tensorflow as tf
>>> logdir = tempfile.mkdtemp()
>>> with tf.summary.create_file_writer(logdir).as_default():
...     _ = tf.summary.scalar("train/loss", 0.5, step=1)
>>> run = read_run(logdir, kinds=("scalars",))
>>> steps, wall_times, values = run.scalars["train/loss"]
>>> int(steps[0]), float(values[0])
(1, 0.5)
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from tfguard._errors import EventFileError
from tfguard.events._blocks import Block
from tfguard.events._collect import Collector
from tfguard.events._decode import KINDS
from tfguard.events._records import Damage, iter_record_blocks
from tfguard.events._selection import Selection
from tfguard.events._values import HistogramPoint, ImageInfo

__all__ = ["Run", "event_files", "read_run"]

_TIMESTAMP = re.compile(r"tfevents\.(\d+)")


@dataclass
class Run:
    """Everything read from one run directory.

    Series are sorted by step, with one value per step (the last written).

    Args:
        name: the run's name (its path relative to the logdir, `"."` for the root).
        path: the run directory.
        scalars: tag -> `(steps int64, wall_times float64, values float64)` arrays.
            Defaults to `{}`.
        histograms: tag -> list of `HistogramPoint`. Defaults to `{}`.
        texts: tag -> list of `(step, wall_time, text)`. Defaults to `{}`.
        images: tag -> list of `ImageInfo` (several per step when a summary held
            several images). Defaults to `{}`.
        hparams: this run's hparam values, name -> value (numbers are floats).
            Defaults to `{}`.
        hparams_config: the experiment-level hparams config, if this run holds
            it (see `tfguard.events._decode.experiment_config`). Defaults to `None`.
        hparams_session: the run's hparams session: `group_name`,
            `start_time_secs`, and once ended `status` (e.g. `"STATUS_SUCCESS"`)
            and `end_time_secs`. Defaults to `{}`.
        damage: every bad spot found in the files, file by file in reading
            order, by offset within a file. Defaults to `[]`.
        files: the event files read, in reading order. Defaults to `[]`.
    """

    name: str
    path: str
    scalars: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    histograms: dict[str, list[HistogramPoint]] = field(default_factory=dict)
    texts: dict[str, list[tuple[int, float, str]]] = field(default_factory=dict)
    images: dict[str, list[ImageInfo]] = field(default_factory=dict)
    hparams: dict[str, object] = field(default_factory=dict)
    hparams_config: dict | None = None
    hparams_session: dict[str, object] = field(default_factory=dict)
    damage: list[Damage] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def tags(self) -> dict[str, list[str]]:
        """Return the sorted tags of each kind read, e.g. `{"scalars": [...], ...}`."""
        return {
            "scalars": sorted(self.scalars),
            "histograms": sorted(self.histograms),
            "texts": sorted(self.texts),
            "images": sorted(self.images),
        }


def _file_order(name: str) -> tuple:
    """The timestamp in the name, then the name with its numbers compared as numbers: two files
    one writer opened in the same second differ by a counter (`....host.pid.9.v2`, `....10.v2`)."""
    match = _TIMESTAMP.search(name)
    chunks = tuple(int(c) if c.isdigit() else c for c in re.split(r"(\d+)", name))
    return (int(match.group(1)) if match else -1, chunks)


def event_files(run_dir: str | os.PathLike) -> list[str]:
    """Return the event files directly inside `run_dir`, in reading order.

    Example:

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> for n in ("events.out.tfevents.20.h.1.10.v2", "events.out.tfevents.20.h.1.9.v2",
    ...           "events.out.tfevents.3.h.1.11.v2", "notes.txt"):
    ...     open(os.path.join(d, n), "w").close()
    >>> [os.path.basename(p) for p in event_files(d)]
    ['events.out.tfevents.3.h.1.11.v2', 'events.out.tfevents.20.h.1.9.v2', 'events.out.tfevents.20.h.1.10.v2']

    Args:
        run_dir: the directory.

    Returns:
        Paths of regular files whose name contains `tfevents`, sorted by the
        timestamp in the name, then by name, its numbers compared as numbers.
    """
    run_dir = os.fspath(run_dir)
    try:
        entries = list(os.scandir(run_dir))
    except OSError:
        return []
    names = []
    for entry in entries:
        try:
            if "tfevents" in entry.name and entry.is_file():
                names.append(entry.name)
        except OSError:
            continue
    return [os.path.join(run_dir, name) for name in sorted(names, key=_file_order)]


def read_run(
    run_dir: str | os.PathLike,
    *,
    tags: str | Iterable[str] | None = None,
    prefixes: str | Iterable[str] | None = None,
    kinds: str | Iterable[str] = KINDS,
    load_images: bool = False,
    name: str | None = None,
) -> Run:
    """Read the event files of one run directory.

    Reading streams the files record by record and keeps only the selected
    tags and kinds, so memory follows what is asked, not the file size.
    Damaged files never raise: intact records are kept and each bad spot is
    listed in `Run.damage`.

    Example:

    >>> import tempfile
    >>> import tensorflow as tf
    >>> logdir = tempfile.mkdtemp()
    >>> with tf.summary.create_file_writer(logdir).as_default():
    ...     _ = tf.summary.text("config/model", "dense", step=0)
    >>> read_run(logdir).texts["config/model"][0][2]
    'dense'

    Args:
        run_dir: a directory that directly holds `*tfevents*` files.
        tags: exact tag names to read. Defaults to `None` (all tags).
        prefixes: tag prefixes to read, e.g. `["grad_norm/"]`; a tag is read if
            it is in `tags` or starts with one of `prefixes`. Defaults to `None`.
        kinds: kinds to read, from `("scalars", "histograms", "texts", "hparams",
            "images")`. Defaults to all of them.
        load_images: keep the encoded image bytes in `ImageInfo.data`.
            Defaults to `False`.
        name: the run's name. Defaults to `None` (the directory's base name).

    Returns:
        The `Run`; an existing directory without event files gives an empty run.

    Raises:
        EventFileError: if `run_dir` does not exist or is not a directory.
        ContractError: if `tags`, `prefixes` or `kinds` are malformed.
    """
    selection = Selection.build(tags=tags, prefixes=prefixes, kinds=kinds, load_images=load_images)
    return _read(os.fspath(run_dir), selection, name)


def _read(run_dir: str, selection: Selection, name: str | None) -> Run:
    if not os.path.isdir(run_dir):
        what = "is not a directory" if os.path.exists(run_dir) else "does not exist"
        raise EventFileError(
            f"Cannot read run {run_dir!r}: it {what}. Expected a directory holding "
            f"*tfevents* files.",
            hint="pass the folder given to tf.summary.create_file_writer (or its parent "
            "to read_logdir), not an event file",
        )
    if name is None:
        name = os.path.basename(os.path.normpath(run_dir)) or "."
    files = event_files(run_dir)
    damage: list[Damage] = []
    collector = Collector(selection, damage)
    for path in files:
        first = len(damage)
        for item in iter_record_blocks(path, damage):
            if isinstance(item, Block):
                collector.add_block(path, item)
            else:
                collector.add(path, *item)
        damage[first:] = sorted(damage[first:], key=lambda d: d.offset)  # in file order
    return Run(name=name, path=run_dir, damage=damage, files=files, **collector.finish())
