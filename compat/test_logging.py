"""The Logger writes what tfguard reads back, and the live diagnosis names a run that does not learn, on this pair."""

from __future__ import annotations

import json

import keras
import numpy as np

import tfguard
from programs import bn_classifier, classification_data
from tfguard import _tags


def test_the_logger_writes_scalars_histograms_and_hparams_that_read_back(tmp_path):
    model = bn_classifier()
    x, y = classification_data(128)
    logger = tfguard.Logger(str(tmp_path / "run"), hparams={"lr": 0.01}, run_subdir=False, scalars_every=2,
                            histograms_every=4)
    model.fit(x, y, batch_size=16, epochs=2, validation_split=0.25, verbose=0, callbacks=[logger])
    runs = tfguard.read_logdir(tmp_path / "run")
    scalars = {tag: series for run in runs.values() for tag, series in run.scalars.items()}
    steps, _, values = scalars[_tags.GLOBAL_GRAD_NORM]
    assert list(steps[:3]) == [1, 3, 5] and np.all(np.isfinite(values)) and values[0] > 0
    assert {_tags.train("loss"), _tags.val("loss"), _tags.val("accuracy")} <= set(scalars)
    histograms = {tag for run in runs.values() for tag in run.histograms}
    assert _tags.hist_activations("hidden") in histograms
    assert any(run.hparams for run in runs.values())


def test_live_diagnosis_stops_a_run_that_does_not_learn():
    keras.utils.set_random_seed(0)
    x, y = classification_data(256)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu", name="hidden"),
                              keras.layers.Dense(3, activation="softmax", name="out")])
    model.compile(optimizer=keras.optimizers.Adam(1e-8), loss="sparse_categorical_crossentropy")
    live = tfguard.LiveDiagnosis(instrument=False, stop_on_error=True)
    history = model.fit(x, y, batch_size=32, epochs=20, verbose=0, callbacks=[live])
    assert [finding.id for finding in live.findings] == ["no_learning"]
    assert len(history.history["loss"]) == 4  # stopped at the epoch it was seen (Thresholds.min_epochs)
    assert json.dumps(tfguard.diagnose.to_json([live.diagnosis]))  # the report is plain JSON
