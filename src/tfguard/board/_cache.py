"""`BoardCache`: the diagnoses of a log directory, re-read only where its files changed, one run at a time.

A TensorBoard run is a folder holding `*tfevents*` files; its fingerprint
is the name, size and modification time of each of them. The folders are
grouped in families (`tfguard.diagnose._inputs.logdir.run_families`: a
run, or a Keras run's parent with its `train/` and `validation/`); a
family whose fingerprints changed is read and diagnosed again, exactly as
`tfguard diagnose` does (`load_family`, `diagnose`), the others are not.
A look at an unchanged logdir costs one walk and one `stat` per event file.
A file still being written is read up to its last whole record, so a
running job shows what is known so far.

Memory is bounded across runs: one family is read at a time, and a kept
diagnosis keeps only what the tab shows of its signals (the loss curves,
the firewall's counters and records, the texts), never a run's per-layer
series or histograms.

One run cannot take the tab down: a family whose reading or diagnosis
raises (a file crafted to break the reader or a rule) becomes a run of
state `unreadable`, saying what failed, and the others are shown.

Example:

>>> import tempfile
>>> cache = BoardCache(tempfile.mkdtemp())
>>> cache.diagnoses()
[]
"""

from __future__ import annotations

import dataclasses
import os
import threading

from tfguard import _tags
from tfguard.diagnose import Diagnosis, Signals, diagnose
from tfguard.diagnose._inputs.logdir import load_family, root_name, run_families
from tfguard.events import find_runs

__all__ = ["BoardCache", "fingerprint", "unreadable_diagnosis"]

Fingerprint = tuple[tuple[str, int, int], ...]

_SHOWN_SERIES = (_tags.batch("loss"), _tags.train("loss"), _tags.GUARD_VIOLATIONS, _tags.GUARD_SKIPPED)


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


def unreadable_diagnosis(run: str, error: BaseException) -> Diagnosis:
    """The diagnosis shown for a run that could not be read or diagnosed: its state says why.

    Example:

    >>> unreadable_diagnosis("lr_1", RecursionError("too deep")).status["state"]
    'unreadable'
    """
    text = (f"tfguard could not read or diagnose this run ({type(error).__name__}: "
            f"{str(error)[:300]}); the other runs are shown")
    return Diagnosis(run=run, status={"state": "unreadable", "text": text}, notes=[text])


def _shown(signals: Signals) -> Signals:
    """What the tab's views read of a run's signals: loss curves, firewall counters and records, texts."""
    kept = {tag: signals.scalars[tag] for tag in _SHOWN_SERIES if tag in signals.scalars}
    return dataclasses.replace(signals, scalars=kept, histograms={})


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
        self._families: dict[str, tuple[tuple, list[Diagnosis]]] = {}
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
            One `Diagnosis` per run; unchanged families are not read again; a
            family that could not be read or diagnosed gives an `unreadable` one.

        Raises:
            EventFileError: if the logdir does not exist or is not a directory.
        """
        with self._lock:
            prints = self.fingerprints()
            if prints == self._prints:
                return list(self._result)
            kept, updated = {}, {}
            for family, members in run_families(prints).items():
                key = tuple((name, prints[name]) for name in members)
                hit = self._families.get(family)
                found = hit[1] if hit is not None and hit[0] == key else self._diagnose(family, members)
                kept[family] = (key, found)
                times = [mtime for _name, mark in key for _file, _size, mtime in mark]
                for d in found:
                    if times:
                        updated[d.run] = max(times) / 1e9
            self._families, self._prints, self._updated = kept, prints, updated
            self._result = sorted((d for _key, found in kept.values() for d in found),
                                  key=lambda d: d.run)
            return list(self._result)

    def _diagnose(self, family: str, members: list[str]) -> list[Diagnosis]:
        self.reads += len(members)
        try:
            return [dataclasses.replace(d, signals=_shown(d.signals)) if d.signals is not None else d
                    for d in map(diagnose, load_family(self.logdir, members))]
        except Exception as error:  # noqa: BLE001 - one run's failure must not take the tab down
            return [unreadable_diagnosis(root_name(self.logdir) if family == "." else family, error)]

    def updated(self, run: str) -> float | None:
        """The mtime (seconds since the epoch) of the newest event file of a diagnosed run, or `None`."""
        return self._updated.get(run)
