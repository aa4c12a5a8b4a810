"""Fuzzing the reader: any damage to a valid file never raises, and keeps the intact prefix."""

from __future__ import annotations

import math
import os
import random
import struct
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.events.eventdata import record_spans, scalar_event
from tfguard.events import read_run
from tfguard.events._records import frame_record, iter_records, masked_crc32c

TAGS = ["loss", "grad_norm/dense_1", "été"]


class Case:
    """A valid file (`blob`) of `records` and its damaged copy; shown briefly on failure."""

    def __init__(self, records: list, blob: bytes, damaged: bytes, how: str):
        self.records, self.blob, self.damaged, self.how = records, blob, damaged, how

    def __repr__(self) -> str:
        return f"Case({len(self.records)} records, {len(self.blob)} bytes, {self.how})"


@st.composite
def damaged_files(draw):
    """A valid file of scalar records at steps 1..n, then one random damage."""
    count = draw(st.one_of(st.integers(1, 12), st.integers(520, 600)))
    if count <= 12:
        tags = draw(st.lists(st.sampled_from(TAGS), min_size=count, max_size=count))
        values = draw(st.lists(st.floats(width=32), min_size=count, max_size=count))
    else:  # enough records for the columnar path; drawn from a seed to stay fast
        rng = random.Random(draw(st.integers(0, 2**32)))
        tags = [rng.choice(TAGS) for _ in range(count)]
        values = [struct.unpack("<f", struct.pack("<f", rng.uniform(-1e3, 1e3)))[0] for _ in tags]
    records = [(tag, step, value) for step, (tag, value) in enumerate(zip(tags, values), start=1)]
    blob = b"".join(frame_record(scalar_event(*r).SerializeToString()) for r in records)
    kind = draw(st.sampled_from(["truncate", "flip", "overwrite", "insert", "append"]))
    pos = draw(st.integers(0, len(blob) - 1))
    garbage = draw(st.binary(min_size=1, max_size=40))
    how = f"{kind} at {pos}" + ("" if kind in ("truncate", "flip") else f" with {garbage!r}")
    if kind == "truncate":
        damaged = blob[:pos]
    elif kind == "flip":
        damaged = bytearray(blob)
        damaged[pos] ^= 1 << draw(st.integers(0, 7))
        damaged = bytes(damaged)
    elif kind == "overwrite":
        damaged = blob[:pos] + garbage + blob[pos + len(garbage) :]
    elif kind == "insert":
        damaged = blob[:pos] + garbage + blob[pos:]
    else:
        damaged = blob + garbage
    return Case(records, blob, damaged, how)


def _first_difference(damaged: bytes, blob: bytes) -> int | None:
    """Where `damaged` stops being `blob`: `None` if equal, the cut if a prefix."""
    if damaged == blob:
        return None
    common = os.path.commonprefix([damaged, blob])
    return len(common)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(damaged_files())
def test_reader_never_raises_and_keeps_the_intact_prefix(case):
    records, blob, damaged = case.records, case.blob, case.damaged
    with tempfile.TemporaryDirectory() as logdir:
        with open(os.path.join(logdir, "events.out.tfevents.1.host"), "wb") as f:
            f.write(damaged)
        run = read_run(logdir)
    spans = record_spans(blob)
    first = _first_difference(damaged, blob)
    intact_end = len(blob) if first is None else first
    read = {
        (tag, int(step)): value
        for tag, (steps, _, values) in run.scalars.items()
        for step, value in zip(steps, values)
    }
    for (tag, step, value), (_, end) in zip(records, spans):
        if end > intact_end:
            break
        got = read[(tag, step)]
        assert got == value or (math.isnan(got) and math.isnan(value))
    boundaries = {start for start, _ in spans} | {len(blob)}
    is_cut = first is not None and len(damaged) == first
    if first is None or (is_cut and first in boundaries):
        assert run.damage == []
    else:
        start = next((s for s, e in spans if s <= first < e), len(blob))
        assert run.damage and run.damage[0].offset == start
    for damage in run.damage:
        assert 0 <= damage.offset <= len(damaged)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.one_of(st.binary(min_size=0, max_size=3000),
                 st.integers(0, 3000).map(lambda n: b"\0" * n)))
def test_a_file_of_anything_is_damage_at_offset_zero_never_an_error(content):
    with tempfile.TemporaryDirectory() as logdir:
        path = os.path.join(logdir, "events.out.tfevents.1.host")
        with open(path, "wb") as f:
            f.write(content)
        run = read_run(logdir)
    if not content:
        assert run.damage == []
        return
    assert run.damage and run.damage[0].offset == 0 and run.damage[0].path == path
    if len(content) >= 12 and not any(content):
        assert run.damage[0].kind == "corrupt" and "all zero bytes" in run.damage[0].reason


@settings(max_examples=100, derandomize=True, deadline=None)
@given(damaged_files(), st.integers(64, 5000), st.integers(0, 200),
       st.integers(0, 2**64 - 1), st.booleans())
def test_chunk_size_cap_and_a_lying_length_never_change_the_intact_prefix(
    case, chunk_size, cap, lie, insert_lie
):
    """Small chunks, a small record cap, and a valid header claiming any length."""
    blob = case.blob
    spans = record_spans(blob)
    cut = spans[len(spans) // 2][0]  # a record boundary
    header = struct.pack("<Q", lie)
    hostile = header + struct.pack("<I", masked_crc32c(header))
    data = blob[:cut] + hostile + blob[cut:] if insert_lie else blob
    with tempfile.TemporaryDirectory() as logdir:
        path = os.path.join(logdir, "events.out.tfevents.1.host")
        with open(path, "wb") as f:
            f.write(data)
        damage: list = []
        got = [(offset, bytes(d)) for offsets, datas in
               iter_records(path, damage, chunk_size=chunk_size, max_record_bytes=cap)
               for offset, d in zip(offsets, datas)]
    expected = [(start, blob[start + 12 : end - 4]) for start, end in spans]
    if not insert_lie:
        kept = [r for r in expected if len(r[1]) <= cap]
        assert got == kept
        assert [d.offset for d in damage] == [s for s, d in expected if len(d) > cap]
        assert all(d.kind == "oversized" for d in damage)
        return
    before = [r for r in expected if r[0] < cut]
    assert got[: len([r for r in before if len(r[1]) <= cap])] == [r for r in before if len(r[1]) <= cap]
    lie_damage = [d for d in damage if d.offset == cut]
    assert len(lie_damage) == 1  # the lie is reported where it is, whatever it claims
    if lie > cap:
        assert lie_damage[0].kind in ("oversized", "corrupt") and str(lie) in lie_damage[0].reason
