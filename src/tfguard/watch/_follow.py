"""Follow one event file that is being written: read only what was appended since the last look.

A `FileFollower` keeps the offset of the first byte it has not consumed
(always a record boundary) and, at each `poll`, reads from there to the end
of the file with the events reader (`tfguard.events._records`), which checks
every record's framing and CRCs. A file whose size and modification time
did not change is not opened at all, so a poll costs a `stat` plus the
bytes appended; `ByteCounter` counts every byte actually read.

Damage is held back while it may still heal. A writer that is still
writing leaves a half-written record at the end of its file (TensorFlow's
writers write through a buffer that is flushed every `flush_millis`), and a
mounted filesystem may show a file's new size before its new bytes. So the
records before a bad spot are consumed, the bad spot itself is *pending*,
and the next poll reads again from there. It is reported (confirmed) only
when the file stopped growing (its size unchanged and its modification time
`settle` seconds old) or the same spot is still bad `settle` seconds after
it was first seen; then reading goes past it, as `tfguard diagnose` does
on the finished file (a record whose data CRC fails is skipped; a length
that cannot be trusted stops the file).

Example:

>>> import os, tempfile
>>> from tfguard.events._records import frame_record
>>> path = os.path.join(tempfile.mkdtemp(), "events.out.tfevents.1.h")
>>> whole, half = frame_record(b"first"), frame_record(b"second")
>>> with open(path, "wb") as f:
...     _ = f.write(whole + half[:9])              # the writer is mid-record
>>> got = []
>>> follower = FileFollower(path, settle=3600)
>>> follower.poll(lambda item: got.extend(item[1]), now=0.0), got, follower.offset
([], [b'first'], 21)
>>> with open(path, "ab") as f:
...     _ = f.write(half[9:])                       # ... and finishes it
>>> follower.poll(lambda item: got.extend(item[1]), now=0.0), got
([], [b'first', b'second'])
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from tfguard.events._blocks import Block
from tfguard.events._records import Damage, iter_record_blocks

__all__ = ["DEFAULT_SETTLE", "ByteCounter", "FileFollower", "FileRewritten"]

DEFAULT_SETTLE = 150.0
"""Seconds a damaged spot may stay bad before it is reported (150 s).

TensorFlow's `tf.summary.create_file_writer` flushes every 120 s by default
(`flush_millis`), so a record can stay half-written that long in a healthy
job; tfguard's Logger flushes every 10 s and at each epoch end."""

Item = "tuple[list[int], list[bytes]] | Block"


class FileRewritten(Exception):
    """The file is shorter than what was already read from it: it was replaced or truncated."""


class ByteCounter:
    """Counts the bytes read from event files (what a poll costs).

    Example:

    >>> counter = ByteCounter()
    >>> counter.add(10); counter.add(5); counter.total
    15
    """

    def __init__(self):
        self.total = 0

    def add(self, count: int) -> None:
        """Adds `count` bytes read."""
        self.total += count


class _CountingFile:
    """An unbuffered binary file that tells a `ByteCounter` every byte it reads."""

    def __init__(self, path: str, counter: ByteCounter):
        self._raw = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by the reader
        self._counter = counter
        self.position = 0  # where the last read ended (kept after closing)

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._counter.add(len(data))
        self.position = self._raw.tell()
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        self.position = self._raw.seek(offset, whence)
        return self.position

    def tell(self) -> int:
        return self._raw.tell()

    def fileno(self) -> int:
        return self._raw.fileno()

    @property
    def closed(self) -> bool:
        return self._raw.closed

    def close(self) -> None:
        self._raw.close()


def _stops_reading(damage: Damage) -> bool:
    """Whether the reader stopped at this spot (nothing after it was read)."""
    return damage.kind in ("truncated", "unreadable") or damage.reason.startswith(
        ("length crc mismatch", "read error", "cannot open"))


def _before(item, limit: int):
    """The records of `item` (a `Block` or `(offsets, datas)`) that start before `limit`."""
    if isinstance(item, Block):
        keep = item.offsets < limit
        if bool(np.all(keep)):
            return item
        return Block(item.offsets[keep], item.rows[keep], []) if bool(keep.any()) else None
    offsets, datas = item
    count = sum(1 for offset in offsets if offset < limit)
    return (offsets[:count], datas[:count]) if count else None


class FileFollower:
    """Reads one event file a little at a time, as it grows.

    Args:
        path: the event file.
        settle: seconds a bad spot may stay bad before it is reported.
            Defaults to `DEFAULT_SETTLE`.
        counter: counts the bytes read. Defaults to `None` (a new `ByteCounter`).
    """

    def __init__(self, path: str, *, settle: float = DEFAULT_SETTLE,
                 counter: ByteCounter | None = None):
        self.path = path
        self.settle = float(settle)
        self.counter = counter if counter is not None else ByteCounter()
        self.offset = 0  # the first byte not consumed: a record boundary
        self._seen: tuple[int, float] | None = None  # (size, mtime) at the last look
        self.identity: tuple[int, int] | None = None  # (device, inode): the file under any name
        self._pending: dict[tuple[int, str], float] = {}  # (offset, kind) -> first seen
        self._accepted: set[tuple[int, str]] = set()  # reported: read past them
        self.reported: list[Damage] = []  # every damage reported, in order

    @property
    def pending(self) -> list[tuple[int, str]]:
        """The `(offset, kind)` of the bad spots waited on (not reported yet)."""
        return sorted(self._pending)

    def poll(self, sink: Callable[[object], None], *, now: float) -> list[Damage]:
        """Hands the records appended since the last poll to `sink`, in file order.

        Args:
            sink: called with each `(offsets, datas)` or `Block` of intact records.
            now: the current time (`time.time()`), to judge how long a spot stayed bad.

        Returns:
            The damage confirmed by this poll (each reported once, ever).

        Raises:
            FileRewritten: if the file is now shorter than what was consumed.
        """
        try:
            stat = os.stat(self.path)
        except OSError:
            return []  # gone for now: the run notices when it lists its files
        self.identity = (stat.st_dev, stat.st_ino)
        seen = (stat.st_size, stat.st_mtime)
        changed = seen != self._seen
        self._seen = seen
        if stat.st_size < self.offset:
            raise FileRewritten(self.path)
        stopped = now - stat.st_mtime >= self.settle  # not written for `settle` seconds
        confirmed: list[Damage] = []
        read = changed
        for _ in range(10_000):  # each pass reads past the spots the last one confirmed
            if not read and not (self._pending and (stopped or self._overdue(now))):
                break
            found = self._read(sink, now)
            due = [d for d in found if stopped or self._overdue(now, d)]
            if not due:
                break
            for d in due:
                self._accepted.add((d.offset, d.kind))
                self._pending.pop((d.offset, d.kind), None)
            confirmed.extend(due)
            read = True
        self.reported.extend(confirmed)
        return confirmed

    def _overdue(self, now: float, damage: Damage | None = None) -> bool:
        """Whether a pending spot (or `damage`'s) has been bad for `settle` seconds."""
        if damage is not None:
            first = self._pending.get((damage.offset, damage.kind))
            return first is not None and now - first >= self.settle
        return any(now - first >= self.settle for first in self._pending.values())

    def _read(self, sink: Callable[[object], None], now: float) -> list[Damage]:
        """Reads from `offset` to the end, or to the first bad spot not reported yet.

        Returns the damage found that is not reported yet (now pending).
        """
        damage: list[Damage] = []
        files: list[_CountingFile] = []

        def opener(path: str) -> _CountingFile:
            files.append(_CountingFile(path, self.counter))
            return files[-1]

        items = iter_record_blocks(self.path, damage, start=self.offset, opener=opener)
        try:
            for item in items:
                limit = self._first_new(damage)
                if limit is None:
                    sink(item)
                    continue
                kept = _before(item, limit)
                if kept is not None:
                    sink(kept)
                break
        finally:
            items.close()
        limit = self._first_new(damage)
        stop = next((d for d in damage if _stops_reading(d)), None)
        if limit is not None:
            self.offset = limit
        elif stop is not None:
            self.offset = stop.offset
        elif files:
            self.offset = max(self.offset, files[-1].position)
        new = [d for d in damage if (d.offset, d.kind) not in self._accepted]
        self._pending = {(d.offset, d.kind): self._pending.get((d.offset, d.kind), now)
                         for d in new}
        return new

    def _first_new(self, damage: list[Damage]) -> int | None:
        """The offset of the first bad spot in `damage` not reported yet, or `None`."""
        offsets = [d.offset for d in damage if (d.offset, d.kind) not in self._accepted]
        return min(offsets) if offsets else None
