"""Every train function the host may run: the timed one (one replica, a graph), XLA, `run_eagerly`, several steps per call.

Each is guarded and listened to; a NaN batch is rejected with every weight
left as it was, the listener gets its records and the input wait of the
recording steps is measured.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tfguard  # noqa: E402
from tfguard import _tags  # noqa: E402
from tfguard._firewall import instrument  # noqa: E402

MODES = {
    "graph": {},
    "xla": {"jit_compile": True},
    "eager": {"run_eagerly": True},
    "three steps per call": {"steps_per_execution": 3},
}


def _model(**compile_args):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", **compile_args)
    return model


@pytest.mark.parametrize("mode", list(MODES))
def test_a_guarded_listened_model_trains_rejects_a_nan_batch_and_measures_its_input_wait(mode):
    rng = np.random.default_rng(0)
    x = rng.random((48, 4), dtype=np.float32)
    y = (np.arange(48) % 3).astype("int64")
    model = _model(**MODES[mode])
    tfguard.guard(model, policy="skip", quarantine_dir=None, localize=False)
    seen = []
    instrument(model).subscribe(lambda record: seen.append(record), scalars_every=2)
    model.fit(x[:8], y[:8], batch_size=8, verbose=0)  # builds everything
    before = [w.copy() for w in model.get_weights()]
    bad = x[8:16].copy()
    bad[3, 1] = np.nan
    model.fit(bad, y[8:16], batch_size=8, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    assert [e.stage for e in tfguard.guard_events(model)] == ["data"]
    model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    assert not all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    waits = [r.scalars[_tags.INPUT_WAIT_FRACTION] for r in seen if _tags.INPUT_WAIT_FRACTION in r.scalars]
    assert waits and all(0.0 <= w <= 1.0 for w in waits)
    assert all(r.scalars.get(_tags.GLOBAL_GRAD_NORM, 1.0) > 0 for r in seen)
