"""Damaged files never crash, never hang, never allocate a lying length.

Intact records before the damage are kept and the damage is reported at the
byte offset of the bad record's start.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import struct
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest
from tensorboard.compat.proto import event_pb2

from tests.events.eventdata import record_spans, scalar_event, write_framed
from tfguard.events import read_run
from tfguard.events._records import MAX_RECORD_BYTES, iter_records, masked_crc32c

N_RECORDS = 6


@pytest.fixture
def small_run(tmp_path):
    """A run with one file of 6 scalar records of tag 'loss' at steps 1..6."""
    run = tmp_path / "run"
    run.mkdir()
    path = str(run / "events.out.tfevents.1.host")
    events = [scalar_event("loss", step, step / 2, wall_time=100.0 + step) for step in range(1, 7)]
    write_framed(path, events)
    return run, path, pathlib.Path(path).read_bytes()


def _steps(run):
    if "loss" not in run.scalars:
        return []
    return run.scalars["loss"][0].tolist()


def test_truncated_at_every_byte_offset_keeps_every_intact_record(small_run):
    run_dir, path, blob = small_run
    spans = record_spans(blob)
    assert len(spans) == N_RECORDS
    for cut in range(len(blob) + 1):
        with open(path, "wb") as f:
            f.write(blob[:cut])
        run = read_run(run_dir)
        intact = [i for i, (_, end) in enumerate(spans) if end <= cut]
        assert _steps(run) == [i + 1 for i in intact], cut
        boundary = cut in {0} | {end for _, end in spans}
        if boundary:
            assert run.damage == [], cut
        else:
            (damage,) = run.damage
            start = next(s for s, e in spans if s <= cut < e)
            assert (damage.path, damage.offset) == (path, start), cut
            assert damage.reason.startswith("truncated record"), damage.reason


def test_flipped_bit_in_data_skips_only_that_record(small_run):
    run_dir, path, blob = small_run
    spans = record_spans(blob)
    start, end = spans[2]
    for byte in (start + 12, start + 20, end - 5, end - 1):  # data and its CRC
        damaged = bytearray(blob)
        damaged[byte] ^= 0x10
        with open(path, "wb") as f:
            f.write(damaged)
        run = read_run(run_dir)
        assert _steps(run) == [1, 2, 4, 5, 6]
        assert [(d.offset, d.reason) for d in run.damage] == [(start, "data crc mismatch")]


def test_flipped_bit_in_length_stops_the_file_at_that_record(small_run):
    run_dir, path, blob = small_run
    start, _ = record_spans(blob)[3]
    for byte in (start, start + 7, start + 9):  # the length and its CRC
        damaged = bytearray(blob)
        damaged[byte] ^= 0x01
        with open(path, "wb") as f:
            f.write(damaged)
        run = read_run(run_dir)
        assert _steps(run) == [1, 2, 3]
        assert [(d.offset, d.reason) for d in run.damage] == [(start, "length crc mismatch")]


@pytest.mark.parametrize("length", [2**63 - 1, 2**40, 10**9])
def test_lying_length_with_a_valid_crc_is_not_allocated(small_run, length):
    run_dir, path, blob = small_run
    header = struct.pack("<Q", length)
    lie = header + struct.pack("<I", masked_crc32c(header)) + b"tiny"
    with open(path, "wb") as f:
        f.write(blob + lie)
    tracemalloc.start()
    began = time.perf_counter()
    try:
        run = read_run(run_dir)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - began < 2.0
    assert peak < 8 << 20  # the reader's chunk, not the lie
    assert _steps(run) == [1, 2, 3, 4, 5, 6]
    (damage,) = run.damage
    assert damage.offset == len(blob)
    assert damage.reason.startswith(f"truncated record: length {length}")


def test_zero_length_file_is_an_empty_run(tmp_path):
    (tmp_path / "events.out.tfevents.1.h").write_bytes(b"")
    run = read_run(tmp_path)
    assert run.scalars == {} and run.damage == []
    assert run.files == [str(tmp_path / "events.out.tfevents.1.h")]


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes_are_reported_at_offset_zero(tmp_path, seed):
    rng = random.Random(seed)
    blob = bytes(rng.randrange(256) for _ in range(rng.choice([1, 11, 12, 13, 4096])))
    (tmp_path / "events.out.tfevents.1.h").write_bytes(blob)
    run = read_run(tmp_path)
    assert run.scalars == {}
    assert [d.offset for d in run.damage] == [0]


def test_random_bytes_after_good_records_keep_the_records(small_run):
    run_dir, path, blob = small_run
    with open(path, "wb") as f:
        f.write(blob + os.urandom(1000))
    run = read_run(run_dir)
    assert _steps(run) == [1, 2, 3, 4, 5, 6]
    assert [d.offset for d in run.damage] == [len(blob)]


def test_a_valid_frame_holding_garbage_is_undecodable_damage(small_run):
    run_dir, path, blob = small_run
    write_framed(
        path, [scalar_event("loss", 1, 0.5), b"\xff\xff\xff\xff", scalar_event("loss", 2, 1.0)]
    )
    run = read_run(run_dir)
    assert _steps(run) == [1, 2]
    (damage,) = run.damage
    assert damage.offset == 16 + len(scalar_event("loss", 1, 0.5).SerializeToString())
    assert damage.reason.startswith("undecodable event")


def test_a_directory_of_1000_tiny_files_reads_in_bounded_time(tmp_path):
    for i in range(1000):
        write_framed(
            str(tmp_path / f"events.out.tfevents.{i:010d}.h"), [scalar_event("loss", i, i)]
        )
    began = time.perf_counter()
    run = read_run(tmp_path)
    elapsed = time.perf_counter() - began
    assert len(run.files) == 1000
    np.testing.assert_array_equal(run.scalars["loss"][0], np.arange(1000))
    assert elapsed < 5.0, elapsed


# -- hostile lengths: a fixed memory bound, whatever a length field says ----------------------------

_HOSTILE_READ = """
import json, sys, time
from tfguard.events import read_run
began = time.perf_counter()
run = read_run(sys.argv[1])
# VmHWM: this process's own peak (ru_maxrss would carry the forking parent's over exec)
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"seconds": time.perf_counter() - began, "peak_mb": peak_kb / 1000,
                  "damage": [[d.offset, d.kind, d.reason] for d in run.damage],
                  "scalars": sorted(run.scalars)}))
"""


def _sparse_file_claiming(path, length: int, size: int) -> None:
    """A sparse file of `size` bytes: one valid record header claiming `length` bytes, then holes."""
    header = struct.pack("<Q", length)
    with open(path, "wb") as f:
        f.write(header + struct.pack("<I", masked_crc32c(header)))
        f.truncate(size)


@pytest.mark.parametrize("fits", [True, False], ids=["record-fills-the-file", "record-past-the-end"])
def test_a_2gb_sparse_file_claiming_a_2gb_record_stays_within_300mb(tmp_path, fits):
    size = 2 << 30
    length = size - 16 if fits else size
    path = tmp_path / "events.out.tfevents.1.h"
    _sparse_file_claiming(path, length, size)
    done = subprocess.run([sys.executable, "-c", _HOSTILE_READ, str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["peak_mb"] <= 300, result
    assert result["seconds"] < 5.0, result
    ((offset, kind, reason),) = result["damage"]
    assert offset == 0
    assert str(length) in reason and str(MAX_RECORD_BYTES) in reason, reason
    if fits:
        assert kind == "oversized" and reason.startswith("record too large"), reason
    else:
        assert kind == "corrupt" and reason.startswith("truncated record"), reason


def test_records_after_an_oversized_record_are_kept(tmp_path):
    path = str(tmp_path / "events.out.tfevents.1.h")
    big = event_pb2.Event(step=0, file_version="x" * 5000)
    offsets = write_framed(path, [scalar_event("loss", 1, 0.5), big, scalar_event("loss", 2, 1.0)])
    damage = []
    datas = [bytes(d) for _, ds in iter_records(path, damage, max_record_bytes=1000) for d in ds]
    assert [event_pb2.Event.FromString(d).step for d in datas] == [1, 2]
    ((d),) = damage
    assert (d.offset, d.kind, d.lost_data) == (offsets[1], "oversized", True)
    assert str(len(big.SerializeToString())) in d.reason and "1000-byte record cap" in d.reason


def test_a_record_larger_than_a_chunk_is_read_with_one_copy(tmp_path):
    path = str(tmp_path / "events.out.tfevents.1.h")
    big = event_pb2.Event(step=3, file_version="y" * (6 << 20))
    write_framed(path, [scalar_event("loss", 1, 0.5), big, scalar_event("loss", 2, 1.0)])
    damage = []
    tracemalloc.start()
    try:
        steps = [event_pb2.Event.FromString(d).step
                 for _, ds in iter_records(path, damage, chunk_size=1 << 20) for d in ds]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert steps == [1, 3, 2] and damage == []
    assert peak < (6 << 20) + (4 << 20), peak  # the record once, plus about a chunk


@pytest.mark.parametrize("chunk_size", [64, 100, 4096])
def test_small_chunks_read_the_same_records(small_run, chunk_size):
    _, path, blob = small_run
    expected = [d for _, ds in iter_records(path, []) for d in ds]
    damage = []
    got = [bytes(d) for _, ds in iter_records(path, damage, chunk_size=chunk_size) for d in ds]
    assert got == expected and damage == []


def test_damage_kinds_tell_a_cut_tail_from_lost_data(small_run, tmp_path):
    _, path, blob = small_run
    spans = record_spans(blob)
    pathlib.Path(path).write_bytes(blob[: spans[-1][1] - 3])
    (cut,) = read_run(os.path.dirname(path)).damage
    assert (cut.kind, cut.lost_data) == ("truncated", False)
    damaged = bytearray(blob)
    damaged[spans[1][0] + 14] ^= 1
    pathlib.Path(path).write_bytes(bytes(damaged))
    (flip,) = read_run(os.path.dirname(path)).damage
    assert (flip.kind, flip.lost_data) == ("corrupt", True)
    damage = []
    assert list(iter_records(str(tmp_path / "missing"), damage)) == []
    assert damage[0].kind == "unreadable"


@pytest.mark.parametrize("content", [b"\0" * 4096, bytes(random.Random(7).randrange(256) for _ in range(4096))],
                         ids=["zeros", "random"])
def test_a_file_damaged_from_its_first_byte_says_so(tmp_path, content):
    (tmp_path / "events.out.tfevents.1.h").write_bytes(content)
    (damage,) = read_run(tmp_path).damage
    assert (damage.offset, damage.kind) == (0, "corrupt")
    assert damage.reason.startswith("length crc mismatch: the file is damaged from its first byte")
    assert ("all zero bytes" in damage.reason) == (content[0] == 0)
