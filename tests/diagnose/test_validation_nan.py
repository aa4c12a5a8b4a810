"""NaN only in the validation data (issue 26, item 3).

The firewall guards training batches, so it rightly skips nothing; the
diagnosis must say that the training loss is finite and the validation data
holds the NaN, and must not tell the user to lower the learning rate.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

import tfguard
from tfguard.diagnose import LiveDiagnosis, diagnose_logdir
from tfguard.remedies._catalogue import remedies_for
from tfguard.summary import Logger


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    logdir = str(tmp_path_factory.mktemp("val_nan"))
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    tfguard.guard(model, policy="skip", quarantine_dir=None)
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 4)).astype("float32"), np.arange(64) % 3
    x_val, y_val = rng.random((16, 4)).astype("float32"), np.arange(16) % 3
    x_val[5, 2] = np.nan  # one bad validation row
    live = LiveDiagnosis()
    model.fit(x, y, batch_size=16, epochs=3, validation_data=(x_val, y_val), verbose=0,
              callbacks=[Logger(logdir, scalars_every=1, histograms_every=0), live])
    return logdir, model, live


def _check(finding):
    assert finding.id == "nonfinite" and finding.where == "validation data"
    assert finding.message.startswith("'val/")
    assert "while the training loss stayed finite" in finding.message
    assert "the validation data holds NaN or Inf, not the training" in finding.message
    assert "do not lower the learning rate" in finding.suggestion
    assert "Lower the learning rate" not in finding.suggestion


def test_the_guard_skips_nothing(run):
    _logdir, model, _live = run
    assert tfguard.guard_events(model) == []


def test_offline_diagnosis_names_the_validation_data(run):
    logdir, _model, _live = run
    (diagnosis,) = diagnose_logdir(logdir)
    (finding,) = diagnosis.by_id("nonfinite")
    _check(finding)
    assert remedies_for(finding) == []  # --try-fixes tries no learning-rate change for it


def test_live_diagnosis_names_the_validation_data(run):
    _logdir, _model, live = run
    (finding,) = live.diagnosis.by_id("nonfinite")
    _check(finding)


def test_nan_in_the_training_loss_is_still_the_training(run):
    from tfguard.diagnose import Signals, Thresholds
    from tfguard.diagnose._rules.numeric import nonfinite

    nan = float("nan")
    signals = Signals.from_arrays({"train/loss": ([1, 2, 3], [1.0, nan, nan]),
                                   "val/loss": ([1, 2, 3], [1.0, nan, nan])})
    (finding,) = nonfinite(signals, Thresholds())
    assert finding.where != "validation data" and "Lower the learning rate" in finding.suggestion
