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
from tfguard.events.records import frame_record

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
