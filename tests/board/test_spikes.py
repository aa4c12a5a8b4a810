"""The tab marks loss spikes on the loss timeline: a guarded run's among its violations, an unguarded run's alone."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from tensorboard.plugins import base_plugin

from tests.board.test_frontend import NODE, _draw
from tfguard.board import TfguardPlugin
from tfguard.board._views import run_view
from tfguard.diagnose import diagnose_logdir


def _stock_keras_run_with_a_spike(logdir):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(80 * 16, 8)).astype("float32")
    y = np.argmax(x[:, :3] * [3.0, 2.0, 1.0], axis=1).astype("int64")
    for row, hot, label in ((70 * 16 + 3, 0, 2), (70 * 16 + 11, 1, 0)):
        x[row], y[row] = 50.0 * np.eye(8)[hot], label
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=16, shuffle=False, verbose=0,
              callbacks=[keras.callbacks.TensorBoard(str(logdir / "unguarded"), update_freq=1)])


def test_an_unguarded_runs_spikes_are_marked_on_its_loss(tmp_path):
    _stock_keras_run_with_a_spike(tmp_path / "logs")
    diagnosis, = diagnose_logdir(tmp_path / "logs")
    view = run_view(diagnosis)
    assert view["spikes"] == [{"step": 71, "value": pytest.approx(view["spikes"][0]["value"]), "action": "applied"}]
    assert view["loss"]["tag"] == "batch/loss" and view["violations"] == []
    if NODE is None:
        pytest.skip("Node.js not installed")
    answer = TfguardPlugin(base_plugin.TBContext(logdir=str(tmp_path / "logs"))).runs_answer()
    drawn = _draw(answer, tmp_path)
    text, = [s["text"] for s in drawn["sections"] if s["cls"].startswith("run ")]
    assert "Loss spikes" in text and "1 loss spike(s) found in the logged batch losses" in text
    assert "step 71: loss spike" in text and "(applied)" in text


def test_a_guarded_runs_rejected_spikes_are_violations_and_hollow_marks(tmp_path):
    import warnings

    import tfguard
    from tfguard.summary import Logger

    rng = np.random.default_rng(0)
    x = rng.normal(size=(80 * 16, 8)).astype("float32")
    y = np.argmax(x[:, :3] * [3.0, 2.0, 1.0], axis=1).astype("int64")
    x[70 * 16 + 3], y[70 * 16 + 3] = 50.0 * np.eye(8)[0], 2
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")
    tfguard.guard(model, policy="skip", spikes=True, quarantine_dir=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        model.fit(x, y, batch_size=16, shuffle=False, verbose=0, callbacks=[Logger(tmp_path / "logs" / "run")])
    diagnosis, = diagnose_logdir(tmp_path / "logs")
    view = run_view(diagnosis)
    assert [(v["stage"], v["batch"]) for v in view["violations"]] == [("spike", 70)]
    assert [(s["step"], s["action"]) for s in view["spikes"]] == [(70, "skipped")]

    from tfguard.diagnose import render_html
    page = render_html([diagnosis])
    assert "loss_spike" in page and 'alt="evidence of loss_spike' in page
