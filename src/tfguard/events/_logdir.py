"""Discover the runs under a log directory and read them all.

A run is a directory that directly contains `*tfevents*` files; its name is
its path relative to the logdir with `/` separators, `"."` for the logdir
itself. Symbolic links to directories are followed (a run linked into a
comparison folder is a run, as TensorBoard shows it); a directory reached a
second time (a link cycle, or two links to one folder) is read once, under
its first name in sorted order.

Example:

>>> import os, tempfile
>>> import tensorflow as tf
>>> logdir = tempfile.mkdtemp()
>>> for run in ("train", "validation"):
...     with tf.summary.create_file_writer(os.path.join(logdir, run)).as_default():
...         _ = tf.summary.scalar("loss", 1.0, step=0)
>>> find_runs(logdir)
['train', 'validation']
>>> sorted(read_logdir(logdir, kinds=("scalars",)))
['train', 'validation']
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from tfguard._errors import EventFileError
from tfguard.events._decode import KINDS
from tfguard.events._run import Run, _read
from tfguard.events._selection import Selection

__all__ = ["find_runs", "read_logdir"]


def _check_logdir(logdir: str) -> None:
    if not os.path.isdir(logdir):
        what = "is not a directory" if os.path.exists(logdir) else "does not exist"
        raise EventFileError(
            f"Cannot read log directory {logdir!r}: it {what}. Expected the folder "
            f"TensorBoard is pointed at (--logdir).",
            hint="check the path, or train first so the summary writer creates it",
        )


def find_runs(logdir: str | os.PathLike) -> list[str]:
    """Return the run directories under `logdir`, relative to it, sorted.

    Example:

    >>> import tempfile
    >>> find_runs(tempfile.mkdtemp())
    []

    Args:
        logdir: the log directory.

    Returns:
        Relative paths with `/` separators (`"."` for `logdir` itself) of the
        directories that directly contain a file whose name holds `tfevents`.

    Raises:
        EventFileError: if `logdir` does not exist or is not a directory.
    """
    logdir = os.fspath(logdir)
    _check_logdir(logdir)
    runs = []
    seen = {os.path.realpath(logdir)}
    for dirpath, dirnames, filenames in os.walk(logdir, followlinks=True):
        dirnames.sort()
        kept = []
        for name in dirnames:  # each directory once: no link cycle, no run read twice
            real = os.path.realpath(os.path.join(dirpath, name))
            if real not in seen:
                seen.add(real)
                kept.append(name)
        dirnames[:] = kept
        if any(
            "tfevents" in name and os.path.isfile(os.path.join(dirpath, name)) for name in filenames
        ):
            rel = os.path.relpath(dirpath, logdir)
            runs.append(rel.replace(os.sep, "/"))
    return sorted(runs)


def read_logdir(
    logdir: str | os.PathLike,
    *,
    tags: str | Iterable[str] | None = None,
    prefixes: str | Iterable[str] | None = None,
    kinds: str | Iterable[str] = KINDS,
    load_images: bool = False,
) -> dict[str, Run]:
    """Read every run under `logdir`.

    Example:

    >>> import tempfile
    >>> read_logdir(tempfile.mkdtemp())
    {}

    Args:
        logdir: the log directory.
        tags: exact tag names to read. Defaults to `None` (all tags).
        prefixes: tag prefixes to read; a tag is read if it is in `tags` or
            starts with one of `prefixes`. Defaults to `None`.
        kinds: kinds to read, from `("scalars", "histograms", "texts", "hparams",
            "images")`. Defaults to all of them.
        load_images: keep the encoded image bytes. Defaults to `False`.

    Returns:
        Run name -> `Run`, in sorted order of the names (see `find_runs`).

    Raises:
        EventFileError: if `logdir` does not exist or is not a directory.
        ContractError: if `tags`, `prefixes` or `kinds` are malformed.
    """
    selection = Selection.build(tags=tags, prefixes=prefixes, kinds=kinds, load_images=load_images)
    logdir = os.fspath(logdir)
    return {
        name: _read(os.path.normpath(os.path.join(logdir, name)), selection, name)
        for name in find_runs(logdir)
    }
