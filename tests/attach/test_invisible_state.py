"""A `fit` with the guard, live diagnosis and a Logger leaves the model as Keras sees it after a plain `fit`.

Compared after two epochs, in order: every layer's `built` flag, every
variable of the model (weights, BatchNormalization statistics, seed
generator states), of its optimizer and of its metrics, bitwise; the
history Keras returns; and the global random streams the program draws
from next (Python's, NumPy's, Keras's global seed generator). The second
program's `train_step` never calls the model itself (keras-io's siamese
network): Keras never builds it, and neither may tfguard's checks.
"""

from __future__ import annotations

import random
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfguard
from tests.invariants import programs

ROWS = 64


def _classifier():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,), name="features")
    h = keras.layers.Dense(16, activation="relu", name="hidden")(inputs)
    h = keras.layers.BatchNormalization(name="norm")(h)
    h = keras.layers.GaussianNoise(0.1, name="noise")(h)
    h = keras.layers.Dropout(0.3, name="drop")(h)
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax", name="out")(h), name="classifier")
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    rng = np.random.default_rng(0)
    return model, rng.standard_normal((ROWS, 6)).astype("float32"), rng.integers(0, 3, ROWS)


def _siamese():
    keras.utils.set_random_seed(0)
    model, x, _ = programs.siamese(dead=False)
    return model, x, None


def _state(model, history) -> dict:
    layers = [model, *model._flatten_layers(include_self=False, recursive=True)]
    # in order: the two runs' automatic names differ in their numbers (adam, adam_1; dense_2_kernel_momentum)
    variables = [(variable.path, np.array(keras.ops.convert_to_numpy(variable)))
                 for variable in [*model.variables, *model.optimizer.variables,
                                  *(v for m in model.metrics for v in m.variables)]]
    streams = {"python": random.random(), "numpy": float(np.random.random()),
               "keras": float(keras.random.uniform(()))}
    return {"built": [(type(layer).__name__, layer.built) for layer in layers], "variables": variables,
            "history": {k: v for k, v in history.history.items() if not k.startswith("guard_")},
            "streams": streams}


def _fit(make, attach: bool, logdir):
    """`fit` for two epochs; attached: guarded, with live diagnosis, and with a Logger when given a `logdir`."""
    model, x, y = make()
    callbacks = []
    if attach:
        tfguard.guard(model, policy="skip", quarantine_dir=None)
        callbacks = [tfguard.LiveDiagnosis()] + ([tfguard.Logger(logdir=str(logdir))] if logdir else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0, callbacks=callbacks)
    return _state(model, history)


def _same_structure(plain: dict, attached: dict) -> None:
    assert attached["built"] == plain["built"]
    assert [(v.shape, v.dtype) for _, v in attached["variables"]] == [(v.shape, v.dtype) for _, v in plain["variables"]]
    assert attached["history"].keys() == plain["history"].keys()
    assert attached["streams"] == plain["streams"]


@pytest.mark.parametrize("make", [_classifier, _siamese], ids=["classifier", "siamese"])
def test_the_guard_and_live_diagnosis_leave_the_model_bitwise_as_a_plain_fit(tmp_path, make):
    plain = _fit(make, attach=False, logdir=None)
    attached = _fit(make, attach=True, logdir=None)
    _same_structure(plain, attached)
    for (path, value), (_, other) in zip(plain["variables"], attached["variables"]):
        assert value.tobytes() == other.tobytes(), path
    assert attached["history"] == plain["history"]


@pytest.mark.parametrize("make", [_classifier, _siamese], ids=["classifier", "siamese"])
def test_with_a_logger_too_the_model_keras_sees_is_the_same(tmp_path, make):
    # The Logger's recording steps compute their signals in the step's graph, which Grappler then fuses
    # otherwise: the weights agree to float rounding (measured: at most 9e-8 apart after two epochs).
    plain = _fit(make, attach=False, logdir=None)
    attached = _fit(make, attach=True, logdir=tmp_path / "runs")
    _same_structure(plain, attached)
    for (path, value), (_, other) in zip(plain["variables"], attached["variables"]):
        np.testing.assert_allclose(other, value, rtol=1e-5, atol=1e-6, err_msg=path)
    for key, values in plain["history"].items():
        np.testing.assert_allclose(attached["history"][key], values, rtol=1e-5, err_msg=key)


def test_an_unbuilt_model_is_not_called_and_a_built_one_keeps_its_statistics():
    from tfguard._hooks.untouched import UnbuiltModel, call, untouched

    lazy = keras.Sequential([keras.layers.Dense(2)])
    with pytest.raises(UnbuiltModel, match="would build it"), untouched(lazy):
        call(lazy, np.ones((1, 3), "float32"))
    assert not lazy.built and not lazy.variables

    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    outputs = keras.layers.BatchNormalization()(inputs, training=True)  # a statistics leak at inference
    model = keras.Model(inputs, outputs)
    before = [np.array(v) for v in model.non_trainable_variables]
    state = random.getstate()
    with untouched(model):
        call(model, tf.fill([4, 3], 5.0), training=False)
        random.random()
    assert all(np.array_equal(b, np.array(v)) for b, v in zip(before, model.non_trainable_variables))
    assert random.getstate() == state
