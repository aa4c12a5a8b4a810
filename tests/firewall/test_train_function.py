"""`timed_train_function` against Keras's own train function: the canary of the rebuilt `_make_function`.

A Keras release that changes what its train function does for one replica
and one step per call (how the batch is read, what the step is run by)
makes the two differ here, and the failure names `keras.__version__`.
"""

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfguard
from tests.hooks.surface import canary
from tfguard._firewall.instrument import instrumentation_of
from tfguard._firewall.step import OUTPUT_KEY
from tfguard._firewall.train_function import BATCH_TIMES, timed_train_function


def _twins(jit_compile):
    models = []
    for _ in range(2):
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])
        model.compile(optimizer="adam", loss="mse", metrics=["mae"], jit_compile=jit_compile)
        models.append(model)
    return models


@pytest.mark.parametrize("jit_compile", [False, True])
def test_canary_one_step_is_what_keras_make_function_builds(jit_compile):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 3)).astype("float32"), rng.normal(size=(8, 1)).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    theirs, ours = _twins(jit_compile)
    with canary("Trainer._make_function (rebuilt by _firewall/train_function.py)"):
        assert list(inspect.signature(theirs._make_function).parameters) == ["step_function"]
        theirs.make_train_function()
        their_logs = theirs.train_function(iter(data))
        if isinstance(their_logs, tf.experimental.Optional):  # Keras hands the logs back in an Optional
            their_logs = their_logs.get_value()
        our_logs = timed_train_function(ours)(iter(data))
        assert sorted(our_logs) == sorted([*their_logs, BATCH_TIMES])
        for key in their_logs:
            assert np.array_equal(np.asarray(our_logs[key]), np.asarray(their_logs[key])), key
        for mine, keras_own in zip(ours.weights, theirs.weights):
            assert np.array_equal(mine.numpy(), keras_own.numpy()), mine.path


def test_the_times_go_under_the_outputs_key_when_the_step_has_one():
    class WithOutputs(keras.Sequential):
        def train_step(self, data):
            logs = super().train_step(data)
            return {**logs, "extra": {"n": tf.constant(1)}}

    model = WithOutputs([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    data = tf.data.Dataset.from_tensors((tf.ones((2, 2)), tf.ones((2, 1)))).repeat(2)
    iterator = iter(data)
    nested = timed_train_function(model, "extra")(iterator)
    assert BATCH_TIMES in nested["extra"] and BATCH_TIMES not in nested
    asked, ready = nested["extra"][BATCH_TIMES].numpy()
    assert ready >= asked > 0
    assert BATCH_TIMES in timed_train_function(model)(iterator)


def test_a_guarded_models_idle_steps_pull_their_batch_in_the_graph_and_hand_back_no_optional():
    # Keras's own function hands its logs back in an `Optional`: two eager ops and ~20 us of structure
    # per output on every step, the guard's whole premium on a small model; its plain trace is the timed one
    model, _ = _twins(False)
    tfguard.guard(model, quarantine_dir=None)
    model.make_train_function()
    data = tf.data.Dataset.from_tensor_slices((np.ones((8, 3), "float32"), np.ones((8, 1), "float32"))).batch(4)
    plain_trace = instrumentation_of(model)._host.function(frozenset())
    logs = plain_trace(iter(data))
    assert not isinstance(logs, tf.experimental.Optional)
    assert BATCH_TIMES in logs[OUTPUT_KEY] and "loss" in logs
    # `train_on_batch` hands a Python iterator: pulled on the host, as Keras does
    before = [v.numpy().copy() for v in model.trainable_variables]
    model.train_on_batch(np.ones((4, 3), "float32"), np.zeros((4, 1), "float32"))
    assert any(not np.array_equal(b, v.numpy()) for b, v in zip(before, model.trainable_variables))
