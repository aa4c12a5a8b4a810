"""`read_run`: several files per run, step order, last-wins, filters, errors."""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest
import tensorflow as tf

from tests.events.eventdata import scalar_event, write_framed
from tfguard._errors import ContractError, EventFileError
from tfguard.events import Run, read_run
from tfguard.events._run import event_files


def test_several_files_are_read_in_timestamp_order_and_the_later_file_wins(tmp_path):
    # Written out of name order on purpose: 9 < 10 as timestamps, not as strings.
    write_framed(str(tmp_path / "events.out.tfevents.10.h"), [scalar_event("loss", 2, 20.0)])
    write_framed(
        str(tmp_path / "events.out.tfevents.9.h"),
        [scalar_event("loss", 1, 1.0), scalar_event("loss", 2, 2.0)],
    )
    run = read_run(tmp_path)
    assert [os.path.basename(f) for f in run.files] == [
        "events.out.tfevents.9.h",
        "events.out.tfevents.10.h",
    ]
    assert run.scalars["loss"][0].tolist() == [1, 2]
    assert run.scalars["loss"][2].tolist() == [1.0, 20.0]


def test_two_real_writers_in_one_run_directory(tmp_path):
    for first in (0, 3):
        writer = tf.summary.create_file_writer(str(tmp_path), filename_suffix=f".part{first}")
        with writer.as_default():
            for step in range(first, first + 3):
                tf.summary.scalar("loss", float(step), step=step)
        writer.close()
    run = read_run(tmp_path)
    assert len(run.files) == 2
    assert run.scalars["loss"][0].tolist() == [0, 1, 2, 3, 4, 5]


def test_out_of_order_steps_are_sorted_and_the_later_record_wins(tmp_path):
    steps = [5, 1, 3, 1, 2, 5, 4]
    events = [scalar_event("loss", s, float(i), wall_time=100.0 + i) for i, s in enumerate(steps)]
    write_framed(str(tmp_path / "events.out.tfevents.1.h"), events)
    steps_out, walls, values = read_run(tmp_path).scalars["loss"]
    assert steps_out.tolist() == [1, 2, 3, 4, 5]
    assert values.tolist() == [3.0, 4.0, 2.0, 6.0, 5.0]
    assert walls.tolist() == [103.0, 104.0, 102.0, 106.0, 105.0]


def test_histograms_and_texts_keep_the_later_record_per_step(tmp_path):
    with tf.summary.create_file_writer(str(tmp_path)).as_default():
        tf.summary.text("t", "first", step=2)
        tf.summary.text("t", "early", step=1)
        tf.summary.text("t", "second", step=2)
        tf.summary.histogram("h", [1.0], step=7, buckets=1)
        tf.summary.histogram("h", [1.0, 1.0, 1.0], step=7, buckets=1)
    run = read_run(tmp_path)
    assert [(s, text) for s, _, text in run.texts["t"]] == [(1, "early"), (2, "second")]
    (point,) = run.histograms["h"]
    assert point.buckets[:, 2].sum() == 3.0


def test_tag_and_prefix_filters(tmp_path):
    names = ["train/loss", "val/loss", "grad_norm/a", "grad_norm/b", "weight_norm/a"]
    write_framed(
        str(tmp_path / "events.out.tfevents.1.h"),
        [scalar_event(name, step, 1.0) for step in range(1, 40) for name in names],
    )
    assert set(read_run(tmp_path, tags=["val/loss"]).scalars) == {"val/loss"}
    assert set(read_run(tmp_path, prefixes=["grad_norm/"]).scalars) == {
        "grad_norm/a",
        "grad_norm/b",
    }
    both = read_run(tmp_path, tags="train/loss", prefixes=("grad_norm/",))
    assert set(both.scalars) == {"train/loss", "grad_norm/a", "grad_norm/b"}
    assert read_run(tmp_path, tags=[]).scalars == {}
    assert len(read_run(tmp_path, tags=["val/loss"]).scalars["val/loss"][0]) == 39


def test_memory_follows_what_is_asked_not_the_file_size(tmp_path):
    events = [scalar_event("wanted", step, 1.0) for step in range(1, 101)]
    for step in range(1, 501):
        event = scalar_event("other", step, 0.0)
        events.append(event)
        hist = event.__class__(step=step, wall_time=1.0)
        value = hist.summary.value.add(tag="big/hist")
        value.metadata.plugin_data.plugin_name = "histograms"
        value.tensor.dtype = 2
        value.tensor.tensor_shape.dim.add(size=1000)
        value.tensor.tensor_shape.dim.add(size=3)
        value.tensor.tensor_content = np.ones((1000, 3)).tobytes()
        events.append(hist)
    write_framed(str(tmp_path / "events.out.tfevents.1.h"), events)
    size = os.path.getsize(tmp_path / "events.out.tfevents.1.h")
    assert size > 12_000_000

    def peak(**kwargs):
        tracemalloc.start()
        try:
            run = read_run(tmp_path, **kwargs)
            return run, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    run, small = peak(tags=["wanted"])
    assert set(run.scalars) == {"wanted"} and run.histograms == {}
    run, scalars_only = peak(kinds=("scalars",))
    assert run.histograms == {} and len(run.scalars["other"][0]) == 500
    _, everything = peak()
    # A few 1 MiB read chunks at most, whatever the file size; everything holds the file.
    assert small < 3 << 20, small
    assert scalars_only < 3 << 20, scalars_only
    assert everything > size > 2 * scalars_only


def test_read_run_errors_and_defaults(tmp_path):
    with pytest.raises(EventFileError, match="does not exist") as err:
        read_run(tmp_path / "nope")
    assert str(tmp_path / "nope") in str(err.value) and err.value.hint
    (tmp_path / "f").write_text("x")
    with pytest.raises(EventFileError, match="is not a directory"):
        read_run(tmp_path / "f")
    with pytest.raises(ContractError, match="kinds"):
        read_run(tmp_path, kinds=("scalar",))
    with pytest.raises(ContractError, match="tags"):
        read_run(tmp_path, tags=[1])
    (tmp_path / "empty").mkdir()
    run = read_run(tmp_path / "empty")
    assert isinstance(run, Run) and run.name == "empty" and run.files == []
    assert read_run(tmp_path / "empty", name="x").name == "x"


def test_event_files_ignores_other_files_and_directories(tmp_path):
    (tmp_path / "events.out.tfevents.2.h").write_bytes(b"")
    (tmp_path / "events.out.tfevents.1.h.profile-empty").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "dir.tfevents").mkdir()
    assert [os.path.basename(p) for p in event_files(tmp_path)] == [
        "events.out.tfevents.1.h.profile-empty",
        "events.out.tfevents.2.h",
    ]


def _start(step: int):
    from tfguard.summary._summary_values import session_start_event

    return session_start_event(step, wall_time=2000.0)


def _text_event(tag: str, step: int, text: str):
    from tensorboard.compat.proto import event_pb2

    from tfguard.summary._summary_values import text_value

    event = event_pb2.Event(step=step, wall_time=1000.0)
    event.summary.value.append(text_value(tag, text))
    return event


@pytest.mark.parametrize("select", [{}, {"tags": ["loss", "notes"]}, {"prefixes": ["lo"]}])
def test_a_session_start_purges_what_earlier_records_wrote_at_its_step_and_after(tmp_path, select):
    # A run killed at step 20 after a checkpoint at step 12, resumed: 13.. trained again.
    killed = [_start(1)] + [scalar_event("loss", s, float(s)) for s in range(1, 21)]
    killed += [scalar_event("other", s, 1.0) for s in (5, 15)] + [_text_event("notes", 14, "old")]
    write_framed(str(tmp_path / "events.out.tfevents.1.h"), killed)
    resumed = [_start(13)] + [scalar_event("loss", s, -float(s)) for s in range(13, 17)]
    write_framed(str(tmp_path / "events.out.tfevents.2.h"), resumed)
    run = read_run(tmp_path, **select)
    steps, _, values = run.scalars["loss"]
    assert steps.tolist() == list(range(1, 17))
    assert values.tolist() == [float(s) for s in range(1, 13)] + [-float(s) for s in range(13, 17)]
    if not select:
        assert run.scalars["other"][0].tolist() == [5]  # every tag is purged, not only re-written ones
    if "tags" in select:
        assert "notes" not in run.texts  # its only point (14) was orphaned


def test_a_session_start_within_one_file_keeps_what_comes_after_it(tmp_path):
    events = [_start(1)] + [scalar_event("loss", s, 1.0) for s in range(1, 11)]
    events += [_start(4)] + [scalar_event("loss", s, 2.0) for s in range(4, 8)]
    write_framed(str(tmp_path / "events.out.tfevents.1.h"), events)
    steps, _, values = read_run(tmp_path).scalars["loss"]
    assert steps.tolist() == list(range(1, 8))
    assert values.tolist() == [1.0] * 3 + [2.0] * 4


def test_the_first_session_start_of_a_run_is_not_a_restart(tmp_path):
    # As TensorBoard's plugin_event_accumulator: a START purges only after an earlier START.
    events = [scalar_event("loss", s, 1.0) for s in range(1, 6)] + [_start(2)]
    write_framed(str(tmp_path / "events.out.tfevents.1.h"), events)
    assert read_run(tmp_path).scalars["loss"][0].tolist() == [1, 2, 3, 4, 5]
