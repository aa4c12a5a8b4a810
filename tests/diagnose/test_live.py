"""LiveDiagnosis on real `fit` calls: reporting epoch, hook, stop_on_error,
instrumented signals, the firewall's events; and the in-memory recorder."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfguard.diagnose import LiveDiagnosis, SignalRecorder


def _digits_like(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 16)).astype("float32")
    y = (x[:, :4].argmax(1)).astype("int64")
    return x, y


def _model(lr, units=4):
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu", name="hidden"),
                              keras.layers.Dense(units, activation="softmax", name="out")])
    model.compile(optimizer=keras.optimizers.Adam(lr), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


def test_stop_on_error_stops_at_the_epoch_the_symptom_appears():
    keras.utils.set_random_seed(0)
    x, y = _digits_like()
    seen = []
    live = LiveDiagnosis(instrument=False, stop_on_error=True, on_finding=seen.append)
    history = _model(lr=1e-8).fit(x, y, epochs=20, batch_size=32, verbose=0, callbacks=[live])
    assert [f.id for f in seen] == ["no_learning"] == [f.id for f in live.findings]
    assert live.reported_epoch[seen[0].key] == 3  # the 4th epoch: Thresholds.min_epochs
    assert len(history.history["loss"]) == 4
    assert live.diagnosis.source == "live"
    skipped = {s["id"]: s["reason"] for s in live.diagnosis.rules_skipped}
    assert "no gradient norms" in skipped["exploding_gradient"]


def test_healthy_fit_reports_nothing_and_keeps_training():
    keras.utils.set_random_seed(0)
    x, y = _digits_like()
    live = LiveDiagnosis(stop_on_error=True, scalars_every=4)
    history = _model(lr=3e-3).fit(x, y, validation_split=0.25, epochs=6, batch_size=32, verbose=0,
                                  callbacks=[live])
    assert len(history.history["loss"]) == 6
    assert [f for f in live.findings if f.severity != "info"] == []
    s = live.recorder.signals()
    assert {"grad_norm/global", "activation/dead_fraction/hidden", "data/label_max"} <= set(s.scalars)
    assert s.series("grad_norm/global").steps.tolist()[:3] == [1, 5, 9]
    assert {"exploding_gradient", "dead_relu", "label_range", "overfitting"} <= set(live.diagnosis.rules_run)
    assert s.model["output_activation"] == "softmax"


def test_subclassed_hook_sees_each_symptom_once():
    class Collect(LiveDiagnosis):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.hooked = []

        def on_finding(self, finding):
            self.hooked.append((finding.id, finding.where))

    keras.utils.set_random_seed(0)
    x, y = _digits_like()
    model = keras.Sequential([keras.Input((16,)),
                              keras.layers.Dense(32, activation="relu", name="hidden",
                                                 bias_initializer=keras.initializers.Constant(-20.0)),
                              keras.layers.Dense(4, activation="softmax", name="out")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    live = Collect(scalars_every=2)
    model.fit(x, y, epochs=5, batch_size=32, verbose=0, callbacks=[live])
    assert ("dead_relu", "hidden") in live.hooked
    assert len(live.hooked) == len(set(live.hooked))
    assert live.reported_epoch[("dead_relu", "hidden")] == 0


def test_firewall_events_reach_the_live_diagnosis(tmp_path):
    from tfguard._firewall import guard

    keras.utils.set_random_seed(0)
    x, y = _digits_like()
    x[40:45] = np.nan
    model = guard(_model(lr=1e-3), policy="skip", quarantine_dir=str(tmp_path / "q"), localize=False)
    live = LiveDiagnosis(scalars_every=1)
    model.fit(x, y, epochs=2, batch_size=32, verbose=0, shuffle=False, callbacks=[live])
    s = live.recorder.signals()
    assert s.texts.get("guard/events"), "the firewall's event listener was not called"
    assert "bad_record" in [f.id for f in live.findings]  # the NaN rows were in the data


def test_recorder_maps_keras_logs_and_histograms():
    rec = SignalRecorder("r", hparams={"lr": 0.1})
    rec.add(3, {"grad_norm/dense": 0.5, "hist/gradients/dense/kernel": np.ones((4, 3))})
    rec.end_epoch(0, 5, {"loss": 1.0, "val_loss": 1.1, "accuracy": 0.5, "learning_rate": 0.1})
    rec.add(7, {"grad_norm/dense": 0.4})
    s = rec.signals()
    assert set(s.scalars) == {"grad_norm/dense", "train/epoch", "train/loss", "val/loss",
                              "train/accuracy", "optimizer/learning_rate"}
    assert s.series("grad_norm/dense").epochs.tolist() == [0, 1]
    assert s.histograms["hist/gradients/dense/kernel"][0][0] == 3
    assert s.hparams == {"lr": 0.1} and s.source == "live"


def test_invalid_arguments():
    with pytest.raises(ValueError, match="scalars_every"):
        LiveDiagnosis(scalars_every=0)
