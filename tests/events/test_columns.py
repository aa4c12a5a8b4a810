"""The columnar fast path gives exactly what parsing record by record gives."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from tensorboard.compat.proto import event_pb2

from tests.events.eventdata import legacy_scalar_event, scalar_event
from tfguard.events import _collect as collect_module
from tfguard.events._collect import Collector
from tfguard.events._columns import aligned_columns
from tfguard.events._selection import Selection


def _mixed_records(seed: int, count: int = 4000) -> list[bytes]:
    """Runs of float32 scalars, and runs mixed with what must leave the fast path."""
    rng = random.Random(seed)
    records = [event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString()]
    pure = False
    for i in range(count):
        if i % 300 == 0:
            pure = rng.random() < 0.6
        step = rng.randrange(1 if pure else 0, 400)  # repeats, goes back; proto3 omits 0
        tag = f"s/{rng.randrange(12)}"
        roll = rng.random() * (0.85 if pure else 1.0)
        if roll < 0.85:
            event = scalar_event(tag, step, rng.uniform(-5, 5), wall_time=float(i))
        elif roll < 0.88:  # a float64 scalar tensor under a float32 tag
            event = scalar_event(tag, step, 0.0, wall_time=float(i))
            event.summary.value[0].tensor.dtype = 2
            event.summary.value[0].tensor.tensor_content = struct.pack("<d", rng.random())
        elif roll < 0.91:
            event = legacy_scalar_event(f"legacy/{rng.randrange(3)}", step, rng.random(), float(i))
        elif roll < 0.94:  # a histogram: aligned columns, but not a scalar
            event = event_pb2.Event(step=step, wall_time=float(i))
            value = event.summary.value.add(tag="h")
            value.metadata.plugin_data.plugin_name = "histograms"
            value.tensor.dtype = 2
            value.tensor.tensor_shape.dim.add(size=1)
            value.tensor.tensor_shape.dim.add(size=3)
            value.tensor.tensor_content = np.array([0.0, 1.0, float(i)]).tobytes()
        elif roll < 0.96:  # two values in one event
            event = scalar_event(tag, step, 1.0, wall_time=float(i))
            event.summary.value.append(scalar_event("s/pair", step, 2.0).summary.value[0])
        elif roll < 0.98:
            event = event_pb2.Event(step=step, wall_time=float(i))
            value = event.summary.value.add(tag="t")
            value.metadata.plugin_data.plugin_name = "text"
            value.tensor.dtype = 7
            value.tensor.string_val.append(f"text {i}".encode())
        else:
            event = event_pb2.Event(step=step, wall_time=float(i))  # no summary
        records.append(event.SerializeToString())
    return records


@pytest.fixture
def columnar_batches(monkeypatch):
    """Counts the batches that took the columnar path."""
    counts = {"aligned": 0}

    def counting(records):
        columns = aligned_columns(records)
        counts["aligned"] += columns is not None
        return columns

    monkeypatch.setattr(collect_module, "aligned_columns", counting)
    return counts


def _collect(records, *, per_record: bool, chunk: int, **selection):
    collector = Collector(Selection.build(**selection), damage=[])
    offsets = list(range(len(records)))
    for start in range(0, len(records), chunk):
        o, d = offsets[start : start + chunk], records[start : start + chunk]
        if per_record:
            collector._add_events("f", o, d)
        else:
            collector.add("f", o, d)
    return collector.finish()


@pytest.mark.parametrize("seed", range(6))
def test_fast_path_matches_parsing_each_event(seed, columnar_batches):
    records = _mixed_records(seed)
    expected = _collect(records, per_record=True, chunk=len(records))
    assert columnar_batches["aligned"] == 0
    for chunk in (700, 4096):
        got = _collect(records, per_record=False, chunk=chunk)
        assert got["scalars"].keys() == expected["scalars"].keys()
        for tag, arrays in expected["scalars"].items():
            for column, want in zip(got["scalars"][tag], arrays):
                np.testing.assert_array_equal(column, want, err_msg=tag)
        assert got["texts"] == expected["texts"]
        assert [p.step for p in got["histograms"]["h"]] == [
            p.step for p in expected["histograms"]["h"]
        ]
    assert columnar_batches["aligned"] >= 2


def test_fast_path_honours_kinds_and_tags():
    records = _mixed_records(7)
    for selection in ({"kinds": ("texts",)}, {"prefixes": ["s/1"]}, {"tags": ["s/3", "h"]}):
        expected = _collect(records, per_record=True, chunk=len(records), **selection)
        got = _collect(records, per_record=False, chunk=1000, **selection)
        assert got["scalars"].keys() == expected["scalars"].keys()
        for tag in expected["scalars"]:
            np.testing.assert_array_equal(got["scalars"][tag][2], expected["scalars"][tag][2])
        assert got["texts"] == expected["texts"]


def test_columns_line_up_only_when_every_record_has_each_field_once():
    good = [scalar_event("a", s, float(s)).SerializeToString() for s in range(1, 5)]
    columns = aligned_columns(good)
    assert list(columns.steps) == [1, 2, 3, 4] and list(columns.tags) == [b"a"] * 4
    assert np.frombuffer(b"".join(columns.contents), "<f4").tolist() == [1.0, 2.0, 3.0, 4.0]
    step_zero = scalar_event("a", 0, 0.5).SerializeToString()
    assert aligned_columns([*good, step_zero]) is None
    no_summary = event_pb2.Event(step=9, wall_time=1.0).SerializeToString()
    pair = scalar_event("a", 9, 1.0)
    pair.summary.value.append(scalar_event("b", 9, 1.0).summary.value[0])
    assert aligned_columns([*good, no_summary, pair.SerializeToString()]) is None
    legacy = legacy_scalar_event("a", 5, 1.0).SerializeToString()
    assert aligned_columns([*good, legacy]) is None
    assert aligned_columns([*good, b"\xff\xff"]) is None
