"""RunWriter: values as TensorBoard reads them, lazy creation, read-only and full disks."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
import tensorflow as tf

from tests.summary.readback import event_files, read_run
from tests.summary.writer_thread import thread_done
from tfguard._errors import SummaryWriteError, TfguardError
from tfguard._signals import buckets as histogram_buckets
from tfguard.summary._summary_values import histogram_value, scalar_value, text_value
from tfguard.summary._writers import RunWriter, SummaryWarning

CHILD = os.path.join(os.path.dirname(__file__), "child.py")


def test_round_trip_scalars_histograms_text(tmp_path):
    writer = RunWriter(str(tmp_path))
    buckets = histogram_buckets.buckets_many([tf.range(10.0)], 5)[0].numpy()
    assert writer.write(3, [scalar_value("train/loss", 0.25), histogram_value("hist/weights/d/k", buckets)])
    assert writer.write(4, [text_value("config/hparams", "| a | 1 |"), scalar_value("train/loss", 0.125)])
    writer.close()
    run = read_run(str(tmp_path))
    assert [(p.step, p.plugin, p.value) for p in run["train/loss"]] == [(3, "scalars", 0.25), (4, "scalars", 0.125)]
    (hist,) = run["hist/weights/d/k"]
    assert hist.plugin == "histograms" and hist.step == 3
    np.testing.assert_allclose(hist.value, buckets)
    assert run["config/hparams"][0].plugin == "text" and run["config/hparams"][0].value == "| a | 1 |"


def test_same_encoding_as_tf_summary(tmp_path):
    """A scalar written by RunWriter decodes like one written by tf.summary.scalar."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    writer = RunWriter(str(ours))
    writer.write(1, [scalar_value("a", 0.5)])
    writer.close()
    with tf.summary.create_file_writer(str(theirs)).as_default():
        tf.summary.scalar("a", 0.5, step=1)
    a, b = read_run(str(ours))["a"][0], read_run(str(theirs))["a"][0]
    assert (a.step, a.plugin, a.value, a.content) == (b.step, b.plugin, b.value, b.content)


def test_a_scalar_pair_carries_its_metadata_once_per_event_file_and_every_reader_sees_every_point(tmp_path):
    from tensorboard.backend.event_processing import plugin_event_accumulator as accumulator

    from tfguard.events import read_run as read_events

    writer = RunWriter(str(tmp_path))
    for step in range(1, 4):
        assert writer.write(step, [("grad_norm/dense", 0.5 * step), ("big", 1e300)])
    writer.close()
    assert writer.write(4, [("grad_norm/dense", 2.0)])  # a new event file
    writer.close()
    described = []
    for path in event_files(str(tmp_path)):
        for event in tf.compat.v1.train.summary_iterator(path):
            described += [(v.tag, v.HasField("metadata")) for v in event.summary.value if v.tag == "grad_norm/dense"]
    assert described == [("grad_norm/dense", True), ("grad_norm/dense", False), ("grad_norm/dense", False),
                         ("grad_norm/dense", True)]
    expected = [(1, 0.5), (2, 1.0), (3, 1.5), (4, 2.0)]
    read = read_run(str(tmp_path))["grad_norm/dense"]
    assert [(p.step, p.plugin, p.value) for p in read] == [(s, "scalars", v) for s, v in expected]
    assert read_run(str(tmp_path))["big"][0].value == float("inf")  # beyond float32: infinite, as a cast makes it
    board = accumulator.EventAccumulator(str(tmp_path))
    board.Reload()
    assert "grad_norm/dense" in board.Tags()["tensors"]
    assert board.SummaryMetadata("grad_norm/dense").plugin_data.plugin_name == "scalars"
    assert [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in board.Tensors("grad_norm/dense")] == expected
    steps, _, values = read_events(str(tmp_path)).scalars["grad_norm/dense"]
    assert list(zip(steps.tolist(), values.tolist())) == expected


def test_a_steps_pairs_and_values_make_the_summary_proto_values_would(tmp_path):
    # the pairs are joined from serialized frames: the event holds what building each value as a proto holds
    from tensorboard.compat.proto import summary_pb2

    from tfguard.summary._summary_values import SCALAR_METADATA, fill_scalar

    text = text_value("config/note", "x")
    steps = [[("a", 0.5), text, ("b/\u00e9", -2.0)], [("a", float("nan")), ("b/\u00e9", 3.0), ("c", 1e-40)]]
    writer = RunWriter(str(tmp_path))
    for step, values in enumerate(steps):
        assert writer.write(step, values)
    writer.close()
    described, expected = set(), []
    for values in steps:
        summary = summary_pb2.Summary()
        for value in values:
            if not isinstance(value, tuple):
                summary.value.append(value)
                continue
            added = summary.value.add(tag=value[0])
            fill_scalar(added.tensor, value[1])
            if value[0] not in described:
                described.add(value[0])
                added.metadata.CopyFrom(SCALAR_METADATA)
        expected.append(summary)
    (path,) = event_files(str(tmp_path))
    written = [summary_pb2.Summary.FromString(e.summary.SerializeToString())  # TensorFlow's class, read as ours
               for e in tf.compat.v1.train.summary_iterator(path) if e.summary.value]
    assert written == expected


def test_created_lazily(tmp_path):
    made = []

    def directory():
        made.append(True)
        os.makedirs(tmp_path / "run")
        return str(tmp_path / "run")

    writer = RunWriter(directory, max_queue=3, flush_millis=5, filename_suffix=".x")
    assert (writer.max_queue, writer.flush_millis, writer.filename_suffix) == (3, 5, ".x")
    writer.flush()
    writer.close()
    assert not made and writer.path is None
    writer.write(0, [scalar_value("a", 1.0)])
    writer.close()
    assert made == [True]
    assert event_files(str(tmp_path / "run"))[0].endswith(".x")


def _unwritable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    return str(blocker / "run")


def test_unwritable_logdir_warns_once_and_goes_on(tmp_path):
    writer = RunWriter(_unwritable(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert writer.write(1, [scalar_value("a", 1.0)]) is False
        assert writer.write(2, [scalar_value("a", 1.0)]) is False
        writer.flush()
        writer.close()
    messages = [str(w.message) for w in caught if w.category is SummaryWarning]
    assert len(messages) == 1
    assert "Could not create the event file" in messages[0] and "writable" in messages[0]
    assert not writer.active


def test_unwritable_logdir_strict_raises(tmp_path):
    writer = RunWriter(_unwritable(tmp_path), strict=True)
    with pytest.raises(SummaryWriteError, match="strict=True") as info:
        writer.write(1, [scalar_value("a", 1.0)])
    assert isinstance(info.value, TfguardError) and info.value.hint


def test_a_failure_reported_from_outside_stops_the_run_like_its_own(tmp_path):
    writer = RunWriter(str(tmp_path))
    assert writer.write(1, [scalar_value("a", 1.0)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer.report_failure(OSError(28, "No space left on device"), "write the projector files")
        assert not writer.write(2, [scalar_value("a", 2.0)])  # logging stopped, no second warning
    assert [w.category for w in caught] == [SummaryWarning]
    message = str(caught[0].message)
    assert "Could not write the projector files" in message and str(tmp_path) in message
    assert not writer.active
    strict = RunWriter(str(tmp_path / "strict"), strict=True)
    with pytest.raises(SummaryWriteError, match="projector files.*strict=True"):
        strict.report_failure(OSError(28, "No space left on device"), "write the projector files")


def test_histogram_value_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"expected shape \[k, 3\]"):
        histogram_value("h", np.zeros((4, 2)))


def _child(mode, logdir):
    return subprocess.run([sys.executable, CHILD, mode, str(logdir)], capture_output=True, text=True,
                          timeout=240, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


@pytest.mark.slow
def test_disk_full_training_goes_on_with_one_warning(tmp_path):
    result = _child("diskfull", tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "finished 3 warnings 1", result.stdout
    assert "Training goes on without TensorBoard logs" in lines[1] and "File too large" in lines[1]


@pytest.mark.slow
def test_disk_full_strict_stops_cleanly(tmp_path):
    result = _child("diskfull-strict", tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr[-2000:]
    assert result.stdout.startswith("stopped SummaryWriteError: Could not")
    assert "strict=True" in result.stdout


def test_a_histogram_value_is_encoded_as_tensorboards_make_tensor_proto_encodes_it():
    from tensorboard.util import tensor_util

    buckets = np.random.default_rng(2).random((30, 3))
    assert histogram_value("hist/x", buckets).tensor == tensor_util.make_tensor_proto(buckets)


def test_values_handed_to_the_writers_thread_are_written_there_and_in_order_before_any_later_call(tmp_path):
    writer = RunWriter(str(tmp_path))
    made_in = []

    def values(step):
        made_in.append(threading.current_thread().name)
        yield ("train/loss", float(step))

    assert writer.write_later(1, values(1))
    thread_done(writer)  # nothing else is called: the thread writes it
    assert made_in == ["tfguard-summary-writer"]
    for step in range(2, 40):
        assert writer.write_later(step, values(step))
    assert writer.write(40, [("train/loss", 40.0)])  # after every value handed over, whichever thread wrote them
    writer.close()
    assert [p.step for p in read_run(str(tmp_path))["train/loss"]] == list(range(1, 41))
    assert len(made_in) == 39 and set(made_in) <= {"tfguard-summary-writer", threading.current_thread().name}


def test_a_failure_in_the_writers_thread_is_warned_once_on_the_callers_thread_at_its_next_call(tmp_path):
    writer = RunWriter(_unwritable(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert writer.write_later(1, [("a", 1.0)])
        thread_done(writer)
        # not warned from the thread: the warning filters are the caller's (one that ignores warnings
        # while the thread fails would lose it for good, and it comes once)
        assert not writer.active and not [w for w in caught if w.category is SummaryWarning]
        assert writer.write_later(2, [("a", 2.0)]) is False  # warned here, on this thread
        writer.flush()
        writer.close()
    messages = [str(w.message) for w in caught if w.category is SummaryWarning]
    assert len(messages) == 1 and "Could not create the event file" in messages[0]


def test_an_error_in_the_writers_thread_is_raised_by_the_next_call_which_still_does_its_work(tmp_path):
    writer = RunWriter(str(tmp_path))
    writer.write_later(1, [("loss", 1.0)])
    assert writer.write_later(2, [("h", np.zeros((4, 2)))])  # not a number: raises where it is written
    thread_done(writer)
    with pytest.raises(TypeError):
        writer.close()
    assert writer._writer is None  # closed all the same
    assert [p.step for p in read_run(str(tmp_path))["loss"]] == [1]


def test_with_no_thread_to_be_had_values_are_written_at_once(tmp_path, monkeypatch):
    def refuse(thread):
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    writer = RunWriter(str(tmp_path))
    assert writer.write_later(1, [("loss", 1.0)]) and writer.write_later(2, [("loss", 2.0)])
    assert writer._thread is None and not writer._pending
    monkeypatch.undo()
    writer.close()
    assert [p.step for p in read_run(str(tmp_path))["loss"]] == [1, 2]


def test_a_strict_writer_writes_at_once_so_its_failure_stops_training_at_that_step(tmp_path):
    writer = RunWriter(_unwritable(tmp_path), strict=True)
    with pytest.raises(SummaryWriteError, match="strict=True"):
        writer.write_later(1, [("a", 1.0)])
