"""Runs of same-length records read with numpy give exactly what the per-record path gives.

The block path (`tfguard.events._blocks`, `tfguard.events._template`) is an
optimisation: on any file, damaged or not, a run read with it must equal the
run read record by record (`MIN_BLOCK` set out of reach).
"""

from __future__ import annotations

import os
import random
import struct
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2

from tests.events.eventdata import legacy_scalar_event, scalar_event
from tfguard.events import _blocks, read_run
from tfguard.events._blocks import find_block, masked_crc32c_rows
from tfguard.events._records import frame_record, iter_record_blocks, masked_crc32c
from tfguard.events._template import ScalarTemplate, factorize


def _read_both(data: bytes, **kwargs):
    with tempfile.TemporaryDirectory() as logdir:
        with open(os.path.join(logdir, "events.out.tfevents.1.h"), "wb") as f:
            f.write(data)
        fast = read_run(logdir, **kwargs)
        saved, _blocks.MIN_BLOCK = _blocks.MIN_BLOCK, 10**12
        try:
            slow = read_run(logdir, **kwargs)
        finally:
            _blocks.MIN_BLOCK = saved
    return fast, slow


def _assert_same(fast, slow):
    assert sorted(fast.scalars) == sorted(slow.scalars)
    for tag, arrays in fast.scalars.items():
        for a, b in zip(arrays, slow.scalars[tag], strict=True):
            np.testing.assert_array_equal(a, b, err_msg=tag)
    assert fast.texts == slow.texts
    assert {t: [(p.step, p.buckets.tolist()) for p in ps] for t, ps in fast.histograms.items()} == {
        t: [(p.step, p.buckets.tolist()) for p in ps] for t, ps in slow.histograms.items()}
    assert [(d.offset, d.reason) for d in fast.damage] == [(d.offset, d.reason) for d in slow.damage]


def _odd_record(rng: random.Random, step: int) -> bytes:
    """A record that is not a plain float32 scalar, or one of another layout."""
    kind = rng.choice(["zero_step", "zero_wall", "legacy", "text", "restart", "double", "bad_utf8",
                       "two_values", "negative_step"])
    if kind == "zero_step":
        return scalar_event("loss", 0, 1.0).SerializeToString()
    if kind == "zero_wall":
        return scalar_event("loss", step, 1.0, wall_time=0.0).SerializeToString()
    if kind == "legacy":
        return legacy_scalar_event("lossX", step, 2.0).SerializeToString()
    if kind == "text":
        event = event_pb2.Event(step=step, wall_time=1.0)
        value = event.summary.value.add(tag="note")
        value.metadata.plugin_data.plugin_name = "text"
        value.tensor.dtype = 7
        value.tensor.string_val.append(b"hi")
        return event.SerializeToString()
    if kind == "restart":
        return event_pb2.Event(step=step // 2 + 1, wall_time=2.0,
                               session_log=event_pb2.SessionLog(status=1)).SerializeToString()
    if kind == "double":
        event = scalar_event("loss", step, 1.0)
        event.summary.value[0].tensor.dtype = 2
        event.summary.value[0].tensor.tensor_content = struct.pack("<d", 3.0)
        return event.SerializeToString()
    if kind == "bad_utf8":  # same length as "loss": bytes that are not UTF-8
        return scalar_event("loss", step, 1.0).SerializeToString().replace(b"loss", b"l\xffss")
    if kind == "two_values":
        event = scalar_event("loss", step, 1.0)
        event.summary.value.append(scalar_event("acc", step, 0.5).summary.value[0])
        return event.SerializeToString()
    return scalar_event("loss", -step, 1.0).SerializeToString()


class Log(bytes):
    """A log file's bytes, shown briefly when a test fails."""

    def __repr__(self) -> str:
        return f"Log({len(self)} bytes)"


@st.composite
def logs(draw):
    """Long runs of same-length scalars (several tags) with odd records and damage mixed in."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    tags = rng.choice([["loss"], ["acc_0", "acc_1", "acc_2"], ["a", "été"], ["loss", "val/loss"]])
    records, step = [], 1
    for _ in range(rng.randint(100, 900)):
        step += rng.choice([1, 1, 1, 0, 100])
        if rng.random() < 0.03:
            records.append(_odd_record(rng, step))
        else:
            value = struct.unpack("<f", struct.pack("<f", rng.uniform(-5, 5)))[0]
            records.append(scalar_event(rng.choice(tags), step, value,
                                        wall_time=1e9 + step).SerializeToString())
    blob = bytearray(b"".join(frame_record(r) for r in records))
    for _ in range(draw(st.integers(0, 3))):  # flip bits: data CRC failures, broken framing
        blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
    return Log(blob)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(logs())
def test_the_block_path_reads_what_the_record_path_reads(data):
    fast, slow = _read_both(data)
    _assert_same(fast, slow)


def test_a_tag_filter_and_a_long_clean_run_agree():
    records = [scalar_event(f"m_{i % 7}", 1 + i // 7, i * 0.5, wall_time=1e9 + i) for i in range(20_000)]
    data = b"".join(frame_record(r.SerializeToString()) for r in records)
    for kwargs in ({}, {"tags": ["m_3"]}, {"prefixes": ["m_"]}, {"kinds": ("histograms",)}):
        fast, slow = _read_both(data, **kwargs)
        _assert_same(fast, slow)
    fast, _ = _read_both(data)
    assert len(fast.scalars["m_0"][0]) == 20_000 // 7 + 1


def test_data_crc_failures_in_a_block_are_reported_at_their_offsets():
    frames = [frame_record(scalar_event("x", s, 1.0).SerializeToString()) for s in range(1, 101)]
    size = len(frames[0])
    blob = bytearray(b"".join(frames))
    for i in (5, 70):
        blob[i * size + 20] ^= 0xFF
    header = bytes(blob[size : size + 12])
    block = find_block(bytes(blob), size, 0, header, size - 16)
    assert block.bad == [5 * size, 70 * size]
    assert len(block.offsets) == 97 and block.offsets[0] == size
    damage = []
    items = list(iter_record_blocks_from(bytes(blob), damage))
    assert [d.offset for d in damage] == [5 * size, 70 * size]
    assert sum(items) == 98


def iter_record_blocks_from(blob: bytes, damage: list):
    """How many records each item holds (lists are reused: count, do not keep)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "f")
        with open(path, "wb") as f:
            f.write(blob)
        for item in iter_record_blocks(path, damage):
            yield len(item[0]) if isinstance(item, tuple) else len(item.offsets)



@pytest.mark.parametrize("length", [1, 7, 50, 300])
def test_vector_crc_equals_google_crc32c(length):
    rng = np.random.default_rng(length)
    rows = rng.integers(0, 256, (200, length), dtype=np.uint8)
    rows[:, : length // 2] = rows[0, : length // 2]  # shared bytes take the constant path
    assert masked_crc32c_rows(rows).tolist() == [masked_crc32c(r.tobytes()) for r in rows]


def test_template_refuses_what_is_not_a_canonical_float32_scalar():
    assert ScalarTemplate.learn(b"\xff\xff") is None
    assert ScalarTemplate.learn(scalar_event("loss", 0, 1.0).SerializeToString()) is None
    assert ScalarTemplate.learn(legacy_scalar_event("loss", 3, 1.0).SerializeToString()) is None
    assert ScalarTemplate.learn(scalar_event("loss", 3, 1.0).SerializeToString()) is not None


def test_factorize_never_merges_two_tags():
    tags = np.frombuffer(b"".join(bytes([i % 256, i // 256]) + b"abcdefghij" for i in range(5000)),
                         np.uint8).reshape(5000, 12)
    names, inverse = factorize(tags)
    assert len(names) == 5000 and [names[i] for i in inverse[:3]] == [t.tobytes() for t in tags[:3]]
