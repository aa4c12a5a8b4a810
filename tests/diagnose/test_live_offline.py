"""One `fit`, diagnosed live and offline: the same signal names, the same findings.

The Logger writes the run's event files while `LiveDiagnosis` records the
same steps in memory (both every 2 steps), with `ReduceLROnPlateau` changing
the learning rate (the case where the Logger once wrote
`train/learning_rate` and the recorder `optimizer/learning_rate`). Reading
the files back must give the rules the names the live recorder gave them,
and the rules must find the same things in both.
"""

from __future__ import annotations

import keras
import numpy as np

from tfguard import _tags
from tfguard.diagnose import LiveDiagnosis, diagnose_logdir
from tfguard.summary import Logger

# written only by the Logger: its own bookkeeping, not a signal of the training
LOGGER_ONLY = {_tags.STEPS_PER_SECOND}


def _fit(tmp_path):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 16)).astype("float32")
    y = x[:, :4].argmax(1).astype("int64")
    model = keras.Sequential([
        keras.Input((16,)),
        keras.layers.Dense(32, activation="relu", name="hidden",
                           bias_initializer=keras.initializers.Constant(-20.0)),  # dead from the start
        keras.layers.Dense(4, activation="softmax", name="out"),
    ])
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    live = LiveDiagnosis(scalars_every=2)
    logger = Logger(tmp_path, scalars_every=2, histograms_every=4)
    plateau = keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, min_delta=10.0)
    model.fit(x, y, validation_split=0.25, epochs=4, batch_size=32, verbose=0,
              callbacks=[logger, live, plateau])
    return live


def test_live_and_offline_diagnoses_see_the_same_signals_and_findings(tmp_path):
    live = _fit(tmp_path)
    (offline,) = diagnose_logdir(tmp_path)
    live_signals = live.recorder.signals()
    offline_signals = offline.signals

    live_names = set(live_signals.scalars)
    offline_names = set(offline_signals.scalars) - LOGGER_ONLY
    assert live_names == offline_names, (live_names ^ offline_names)
    assert _tags.LEARNING_RATE in live_names and "train/learning_rate" not in offline_names
    # the learning rate halved every epoch (min_delta makes every epoch a plateau), seen alike
    lr_live, lr_offline = live_signals.series(_tags.LEARNING_RATE), offline_signals.series(_tags.LEARNING_RATE)
    assert lr_offline.values[-1] < lr_offline.values[0]
    np.testing.assert_allclose(lr_live.values[-1], lr_offline.values[-1], rtol=1e-6)
    assert not any("learning_rate" in tag for tag in [*offline.metrics, *live.diagnosis.metrics])

    def found(diagnosis):
        return sorted((f.id, f.severity, f.where) for f in diagnosis.findings)

    assert found(live.diagnosis) == found(offline)
    assert any(i == "dead_relu" and w == "hidden" for i, _, w in found(offline))
