"""Following one growing event file: only new bytes are read, half-written records are waited for.

Files are written byte by byte with the TFRecord framing (`tests.watch.logs`),
so each test knows where a record starts and can stop a writer mid-record,
finish the record later, or damage a record in the middle.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.watch.logs import EVENT_FILE, append, scalar
from tfguard.events import read_run
from tfguard.watch._follow import FileFollower, FileRewritten


def _values(items: list) -> list[bytes]:
    out = []
    for item in items:
        out.extend(item.records()[1] if hasattr(item, "records") else list(item[1]))
    return out


def _collect(got: list):
    return lambda item: got.append(item if hasattr(item, "records") else (list(item[0]), list(item[1])))


def test_a_half_written_record_is_waited_for_then_read_and_never_reported(tmp_path):
    path = str(tmp_path / EVENT_FILE)
    first, second = scalar("loss", 1, 0.5), scalar("loss", 2, 0.4)
    append(path, first + second[:20])
    follower, got = FileFollower(path, settle=60), []
    now = time.time()
    assert follower.poll(_collect(got), now=now) == []
    assert len(_values(got)) == 1 and follower.offset == len(first)
    assert follower.pending == [(len(first), "truncated")]
    assert follower.poll(_collect(got), now=now + 30) == []  # not settled, file unchanged
    append(path, second[20:])
    assert follower.poll(_collect(got), now=now + 31) == []
    assert len(_values(got)) == 2 and follower.pending == [] and follower.reported == []
    assert follower.offset == len(first + second)


def test_a_cut_tail_is_reported_once_when_the_file_stopped_growing(tmp_path):
    path = str(tmp_path / EVENT_FILE)
    record = scalar("loss", 1, 0.5)
    append(path, record + record[:9])
    now = time.time()
    follower, got = FileFollower(path, settle=60), []
    assert follower.poll(_collect(got), now=now) == []  # written just now: may still grow
    old = now - 600
    os.utime(path, (old, old))  # the writer was killed ten minutes ago
    (damage,) = follower.poll(_collect(got), now=now + 1)
    assert (damage.offset, damage.kind) == (len(record), "truncated")
    assert damage.reason.startswith("truncated record")
    assert follower.poll(_collect(got), now=now + 2) == []  # said once
    assert len(_values(got)) == 1


def test_a_damaged_record_in_a_growing_file_is_held_until_it_stays_bad_then_read_past(tmp_path):
    path = str(tmp_path / EVENT_FILE)
    records = [scalar("loss", step, 1.0 / step) for step in range(1, 7)]
    bad = bytearray(records[2])
    bad[-6] ^= 0xFF  # a flipped bit in the value: the data CRC fails
    append(path, b"".join(records[:2]) + bytes(bad) + b"".join(records[3:]))
    follower, got = FileFollower(path, settle=60), []
    now = time.time()
    assert follower.poll(_collect(got), now=now) == []
    assert len(_values(got)) == 2  # the records before the bad spot, not past it
    assert follower.offset == len(records[0]) * 2
    (damage,) = follower.poll(_collect(got), now=now + 61)  # still bad a settle later
    assert damage.reason == "data crc mismatch" and damage.offset == follower.reported[0].offset
    assert len(_values(got)) == 5  # read past it, as tfguard diagnose reads the finished file
    whole = read_run(str(tmp_path), kinds=("scalars",))
    assert [d.offset for d in whole.damage] == [damage.offset]
    assert len(whole.scalars["loss"][0]) == 5


def test_a_poll_reads_only_the_bytes_appended_since_the_last(tmp_path):
    path = str(tmp_path / EVENT_FILE)
    append(path, b"".join(scalar("loss", step, 0.5) for step in range(100)))
    follower, got = FileFollower(path, settle=60), []
    follower.poll(_collect(got), now=time.time())
    assert follower.counter.total == os.path.getsize(path)
    for round_ in range(3):
        before = follower.counter.total
        assert follower.poll(_collect(got), now=time.time()) == []
        assert follower.counter.total == before  # unchanged file: not opened
        more = b"".join(scalar("loss", 100 * (round_ + 1) + step, 0.5) for step in range(50))
        append(path, more)
        follower.poll(_collect(got), now=time.time())
        assert follower.counter.total - before == len(more)
    assert len(_values(got)) == 250


def test_a_rewritten_file_is_said(tmp_path):
    path = str(tmp_path / EVENT_FILE)
    append(path, scalar("loss", 1, 0.5) * 3)
    follower = FileFollower(path, settle=60)
    follower.poll(lambda item: None, now=time.time())
    with open(path, "wb") as f:
        f.write(scalar("loss", 1, 0.5))
    with pytest.raises(FileRewritten):
        follower.poll(lambda item: None, now=time.time())
