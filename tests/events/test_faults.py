"""Damaged files never crash, never hang, never allocate a lying length.

Intact records before the damage are kept and the damage is reported at the
byte offset of the bad record's start.
"""

from __future__ import annotations

import os
import pathlib
import random
import struct
import time
import tracemalloc

import numpy as np
import pytest

from tests.events.eventdata import record_spans, scalar_event, write_framed
from tfguard.events import read_run
from tfguard.events.records import masked_crc32c

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
