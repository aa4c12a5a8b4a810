"""Round trips: write event files with tf.summary, read them with tfguard.events,
normalize them into Signals (tfguard's layout and the stock Keras layout)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.plugins.hparams import api as hp

from tfguard import _tags
from tfguard._errors import EventFileError
from tfguard.diagnose import diagnose_logdir, load_signals, signals_from_runs
from tfguard.diagnose._inputs.normalize import keras_tag
from tfguard.events import Damage, HistogramPoint, Run

MODEL = {"name": "m", "class": "Sequential", "output_units": 3, "output_activation": "softmax",
         "loss": {"name": "sparse_categorical_crossentropy", "class": "str", "from_logits": False},
         "optimizer": {"class": "Adam", "learning_rate": 0.01},
         "layers": [{"name": "dense", "class": "Dense", "activation": "relu", "units": 4, "params": 20},
                    {"name": "out", "class": "Dense", "activation": "softmax", "units": 3, "params": 15}]}


def write_tfguard_run(path, *, epochs=4, steps_per_epoch=5, hparams=None, lint=None):
    with tf.summary.create_file_writer(path).as_default():
        if hparams:
            hp.hparams(hparams)
        tf.summary.text(_tags.CONFIG_MODEL, json.dumps(MODEL), step=0)
        if lint is not None:
            tf.summary.text("config/lint", json.dumps(lint), step=0)
        for step in range(1, epochs * steps_per_epoch + 1):
            tf.summary.scalar(_tags.grad_norm("sequential/dense"), 0.5, step=step)
            tf.summary.scalar(_tags.grad_norm("sequential/out"), 0.4, step=step)
            tf.summary.scalar(_tags.dead_fraction("dense"), 0.8, step=step)
            if step % steps_per_epoch == 0:
                epoch = step // steps_per_epoch - 1
                tf.summary.scalar(_tags.EPOCH, epoch, step=step)
                tf.summary.scalar(_tags.train("loss"), 1.0 / (epoch + 1), step=step)
                tf.summary.scalar(_tags.val("loss"), 1.2 / (epoch + 1), step=step)
                tf.summary.scalar(_tags.val("accuracy"), 0.5 + 0.1 * epoch, step=step)


def test_tfguard_layout_round_trip(tmp_path):
    write_tfguard_run(str(tmp_path / "lr=0.01"), hparams={"lr": 0.01, "optimizer": "adam"},
                      lint=[{"id": "pipeline_order", "severity": "warning", "message": "no shuffle"}])
    (s,) = load_signals(tmp_path)
    assert (s.run, s.source, s.hparams) == ("lr=0.01", "tfguard", {"lr": 0.01, "optimizer": "adam"})
    assert s.model == MODEL
    assert s.epoch_end_steps.tolist() == [5, 10, 15, 20]
    dead = s.series(_tags.dead_fraction("dense"))
    assert dead.steps.tolist()[:6] == [1, 2, 3, 4, 5, 6]
    assert dead.epochs.tolist()[:6] == [0, 0, 0, 0, 0, 1]
    assert list(s.per_layer("grad_norm")) == ["dense", "out"]
    assert s.lint[0]["message"] == "no shuffle"
    (d,) = diagnose_logdir(tmp_path)
    found = {f.id: f for f in d.findings}
    # named by its path, as the gradient tags know it (issue 22)
    assert found["dead_relu"].where == "sequential/dense" and found["dead_relu"].onset_step == 1
    assert found["pipeline_order"].message == "static check: no shuffle"
    assert d.metrics["val/accuracy"]["best"] == pytest.approx(0.8)
    assert d.metrics["val/accuracy"]["best_epoch"] == 3


def test_extra_lint_is_attached_per_run(tmp_path):
    write_tfguard_run(str(tmp_path / "a"))
    write_tfguard_run(str(tmp_path / "b"))
    lint = {"a": [{"id": "pipeline_order", "message": "shuffle after batch"}]}
    found = {d.run: d.ids for d in diagnose_logdir(tmp_path, lint=lint)}
    assert "pipeline_order" in found["a"] and "pipeline_order" not in found["b"]


def test_hparams_from_markdown_table_when_no_hparams_plugin(tmp_path):
    with tf.summary.create_file_writer(str(tmp_path / "run")).as_default():
        tf.summary.text(_tags.CONFIG_HPARAMS, "| hparam | value |\n|---|---|\n| lr | 0.1 |\n| bs | 32 |", step=0)
        tf.summary.scalar(_tags.train("loss"), 1.0, step=1)
    (s,) = load_signals(tmp_path)
    assert s.hparams == {"lr": "0.1", "bs": "32"}


def test_keras_tag_mapping():
    assert keras_tag("epoch_loss", "train") == "train/loss"
    assert keras_tag("epoch_loss", "validation") == "val/loss"
    assert keras_tag("epoch_learning_rate", "train") == _tags.LEARNING_RATE
    assert keras_tag("batch_loss", "train") == "batch/loss"
    assert keras_tag("batch_steps_per_second", "train") is None
    assert keras_tag("evaluation_loss_vs_iterations", "validation") is None


def _run(name, scalars, histograms=None, hparams=None, damage=None):
    return Run(name=name, path=f"/logs/{name}",
               scalars={t: (np.asarray(s, np.int64), np.zeros(len(s)), np.asarray(v, np.float64))
                        for t, (s, v) in scalars.items()},
               histograms=histograms or {}, hparams=hparams or {}, damage=damage or [])


def test_stock_keras_layout_with_validation_every_other_epoch():
    train = _run("exp/train", {"epoch_loss": (range(6), [2.0, 1.5, 1.2, 1.0, 0.9, 0.8]),
                               "epoch_learning_rate": (range(6), [0.01] * 6)},
                 histograms={"dense/kernel/histogram": [HistogramPoint(0, 0.0, np.ones((2, 3)))]})
    val = _run("exp/validation", {"epoch_loss": ([1, 3, 5], [1.6, 1.1, 0.95]),
                                  "evaluation_loss_vs_iterations": ([20, 40, 60], [1.6, 1.1, 0.95])})
    parent = _run("exp", {}, hparams={"lr": 0.01})
    (s,) = signals_from_runs({"exp": parent, "exp/train": train, "exp/validation": val})
    assert (s.run, s.source, s.hparams) == ("exp", "keras", {"lr": 0.01})
    assert s.epoch_end_steps.tolist() == [10, 20, 30, 40, 50, 60]
    assert s.series("val/loss").steps.tolist() == [20, 40, 60]
    assert s.series("val/loss").epochs.tolist() == [1, 3, 5]
    assert s.series("train/loss").steps.tolist() == [10, 20, 30, 40, 50, 60]
    assert s.series(_tags.LEARNING_RATE) is not None
    assert list(s.histograms) == ["hist/weights/dense/kernel"]


def test_stock_keras_layout_without_validation_has_epochs_only():
    damage = [Damage("/logs/train/events.out.tfevents.1", 120, "bad CRC")]
    train = _run("train", {"epoch_loss": (range(5), [2.3] * 5)}, damage=damage)
    (s,) = signals_from_runs({"train": train}, root_name="my_logs")
    assert s.run == "my_logs" and s.epoch_end_steps is None
    assert s.series("train/loss").steps.tolist() == [-1] * 5
    assert "bad CRC" in s.notes[0]
    from tfguard.diagnose import diagnose

    d = diagnose(s)
    f = d.by_id("no_learning")[0]
    assert (f.onset_step, f.onset_epoch) == (None, 0)


def test_real_stock_callback_logs(tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, validation_split=0.25, epochs=3, batch_size=16, verbose=0,
              callbacks=[keras.callbacks.TensorBoard(str(tmp_path / "run"), histogram_freq=1,
                                                     update_freq="batch")])
    (s,) = load_signals(tmp_path)
    assert (s.run, s.source) == ("run", "keras")
    assert s.epoch_end_steps.tolist() == [3, 6, 9]
    batch = s.series("batch/loss")
    assert batch.steps.tolist() == list(range(1, 10)) and batch.epochs.tolist()[:4] == [0, 0, 0, 1]
    assert "running mean" in s.notes[0]
    assert {"train/loss", "train/accuracy", "val/loss", "val/accuracy"} <= set(s.scalars)


def test_empty_runs_are_left_out_and_missing_logdir_raises(tmp_path):
    os.makedirs(tmp_path / "empty")
    assert diagnose_logdir(tmp_path) == []
    with pytest.raises(EventFileError):
        diagnose_logdir(tmp_path / "missing")


def test_a_custom_reader_can_be_passed(tmp_path):
    def reader(logdir, **kwargs):
        return {"x": _run("x", {_tags.train("loss"): ([1, 2, 3, 4], [1.0, 0.8, 0.6, 0.5])})}

    (d,) = diagnose_logdir(tmp_path, reader=reader)
    assert d.run == "x" and d.findings == []
