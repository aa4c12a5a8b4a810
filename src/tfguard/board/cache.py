"""`BoardCache`: the diagnoses of a log directory, re-read only where its files changed.

A TensorBoard run is a folder holding `*tfevents*` files; its fingerprint
is the name, size and modification time of each of them. Each folder is
read once with tfguard's own reader (`tfguard.events.read_run`) and kept
with its fingerprint; the runs are then normalized and diagnosed by
`tfguard.diagnose.load_signals` and `tfguard.diagnose.diagnose`, exactly
as `tfguard diagnose` does, and each diagnosis is kept with the
fingerprints of the folders it was made from (a Keras run's `train/` and
`validation/`, its parent's hparams). A look at an unchanged logdir costs
one walk and one `stat` per event file; a changed run is read again, the
others are not. A file still being written is read up to its last whole
record, so a running job shows what is known so far.

Example:

>>> import tempfile
>>> cache = BoardCache(tempfile.mkdtemp())
>>> cache.diagnoses()
[]
"""

from __future__ import annotations

import os
import posixpath
import threading
from collections.abc import Iterable

from tfguard.diagnose import Diagnosis, diagnose, load_signals
from tfguard.events import find_runs, read_run

Fingerprint = tuple[tuple[str, int, int], ...]


def fingerprint(run_dir: str) -> Fingerprint:
    """`(name, size, mtime_ns)` of each event file directly in `run_dir`, sorted by name.

    Example:

    >>> import tempfile
    >>> fingerprint(tempfile.mkdtemp())
    ()
    """
    found = []
    try:
        entries = list(os.scandir(run_dir))
    except OSError:
        return ()
    for entry in entries:
        if "tfevents" not in entry.name:
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        found.append((entry.name, st.st_size, st.st_mtime_ns))
    return tuple(sorted(found))


def _members(run: str, names: Iterable[str]) -> list[str]:
    """The TensorBoard runs a tfguard run is made of: itself and its direct sub-folders."""
    return [n for n in names if n == run or (posixpath.dirname(n) or ".") == run]


class BoardCache:
    """The diagnoses of one log directory, cached by the size and mtime of its event files.

    Thread-safe: TensorBoard answers requests on several threads; one
    refresh runs at a time and the others wait for its result.

    Args:
        logdir: the folder TensorBoard was started on.
    """

    def __init__(self, logdir: str | os.PathLike):
        self.logdir = os.fspath(logdir)
        self._lock = threading.Lock()
        self._runs: dict[str, tuple[tuple, object]] = {}
        self._diagnoses: dict[str, tuple[tuple, Diagnosis]] = {}
        self._prints: dict[str, Fingerprint] | None = None
        self._result: list[Diagnosis] = []
        self._updated: dict[str, float] = {}
        self.reads = 0
        """How many run folders were read from disk since the start (a test and benchmark figure)."""

    def fingerprints(self) -> dict[str, Fingerprint]:
        """TensorBoard run name -> fingerprint, for every run under the logdir now."""
        return {name: fingerprint(os.path.join(self.logdir, name)) for name in find_runs(self.logdir)}

    def diagnoses(self) -> list[Diagnosis]:
        """The diagnosis of every run, in run-name order, as `tfguard diagnose` makes them.

        Returns:
            One `Diagnosis` per run; unchanged runs are not read again.

        Raises:
            EventFileError: if the logdir does not exist or is not a directory.
        """
        with self._lock:
            prints = self.fingerprints()
            if prints == self._prints:
                return list(self._result)
            signals = load_signals(self.logdir, reader=lambda _logdir, kinds: self._read(prints, kinds))
            root = os.path.basename(os.path.normpath(self.logdir)) or "."
            result, kept, updated = [], {}, {}
            for s in signals:
                own = "." if s.run == root and root not in prints else s.run
                key = tuple((n, prints[n]) for n in _members(own, prints))
                times = [mtime for _n, mark in key for _f, _size, mtime in mark]
                if times:
                    updated[s.run] = max(times) / 1e9
                hit = self._diagnoses.get(s.run)
                d = hit[1] if hit is not None and hit[0] == key else diagnose(s)
                kept[s.run] = (key, d)
                result.append(d)
            self._diagnoses, self._prints, self._result = kept, prints, result
            self._updated = updated
            return list(result)

    def updated(self, run: str) -> float | None:
        """The mtime (seconds since the epoch) of the newest event file of a diagnosed run, or `None`."""
        return self._updated.get(run)

    def _read(self, prints: dict[str, Fingerprint], kinds) -> dict[str, object]:
        runs = {}
        kinds = tuple(kinds)
        for name, mark in prints.items():
            hit = self._runs.get(name)
            if hit is not None and hit[0] == (mark, kinds):
                runs[name] = hit[1]
                continue
            run = read_run(os.path.normpath(os.path.join(self.logdir, name)), kinds=kinds, name=name)
            self.reads += 1
            self._runs[name] = ((mark, kinds), run)
            runs[name] = run
        for gone in set(self._runs) - set(prints):
            del self._runs[gone]
        return runs


__all__ = ["BoardCache", "fingerprint"]
