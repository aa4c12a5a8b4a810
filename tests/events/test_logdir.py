"""Run discovery under a logdir and `read_logdir`."""

from __future__ import annotations

import os

import pytest
import tensorflow as tf

from tests.events.eventdata import scalar_event, write_framed
from tfguard._errors import EventFileError
from tfguard.events import find_runs, read_logdir


def _scalar_run(path, tag, value):
    writer = tf.summary.create_file_writer(str(path))
    with writer.as_default():
        tf.summary.scalar(tag, value, step=1)
    writer.close()


def test_runs_are_directories_that_directly_hold_event_files(tmp_path):
    _scalar_run(tmp_path, "root", 0.0)
    _scalar_run(tmp_path / "b" / "train", "loss", 1.0)
    _scalar_run(tmp_path / "b" / "validation", "loss", 2.0)
    _scalar_run(tmp_path / "a", "loss", 3.0)
    (tmp_path / "c" / "empty").mkdir(parents=True)
    (tmp_path / "c" / "notes.txt").write_text("no events here")
    assert find_runs(tmp_path) == [".", "a", "b/train", "b/validation"]
    runs = read_logdir(tmp_path)
    assert list(runs) == [".", "a", "b/train", "b/validation"]
    assert runs["b/validation"].name == "b/validation"
    assert runs["b/validation"].path == os.path.join(str(tmp_path), "b", "validation")
    assert runs["b/validation"].scalars["loss"][2].tolist() == [2.0]
    assert set(runs["."].scalars) == {"root"}


def test_read_logdir_passes_filters_to_every_run(tmp_path):
    for run in ("x", "y"):
        (tmp_path / run).mkdir()
        write_framed(
            str(tmp_path / run / "events.out.tfevents.1.h"),
            [scalar_event("keep/a", 1, 1.0), scalar_event("drop", 1, 1.0)],
        )
    runs = read_logdir(tmp_path, prefixes="keep/")
    assert {name: set(run.scalars) for name, run in runs.items()} == {
        "x": {"keep/a"},
        "y": {"keep/a"},
    }


def test_missing_logdir_is_an_event_file_error_with_path_and_fix(tmp_path):
    for call in (find_runs, read_logdir):
        with pytest.raises(EventFileError) as err:
            call(tmp_path / "missing")
        assert str(tmp_path / "missing") in err.value.message
        assert "does not exist" in err.value.message
        assert err.value.hint


def test_an_empty_logdir_has_no_runs(tmp_path):
    assert find_runs(tmp_path) == [] and read_logdir(tmp_path) == {}


def test_a_symlinked_run_is_read_and_a_link_cycle_or_a_second_link_is_read_once(tmp_path):
    from tests.watch.logs import EVENT_FILE, append, epoch_records

    logdir, elsewhere = tmp_path / "logs", tmp_path / "elsewhere"
    append(logdir / "a" / EVENT_FILE, epoch_records(0, 2.3))
    append(elsewhere / "b" / EVENT_FILE, epoch_records(0, 1.0))
    os.symlink(elsewhere / "b", logdir / "linked")  # a run linked into a comparison folder
    os.symlink(logdir, logdir / "loop")  # a cycle
    os.symlink(logdir / "a", logdir / "z_again")  # the same folder a second time
    assert find_runs(logdir) == ["a", "linked"]
    assert sorted(read_logdir(logdir, kinds="scalars")) == ["a", "linked"]
