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
from tfguard._firewall.train_function import BATCH_TIMES, TraceOfSpec, timed_train_function


def _twins(jit_compile):
    models = []
    for _ in range(2):
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])
        model.compile(optimizer="adam", loss="mse", metrics=["mae"], jit_compile=jit_compile)
        models.append(model)
    return models


def _keras_step(model, data):
    """One step of Keras's own train function on `data`; its logs (Keras hands them back in an `Optional`)."""
    logs = model.train_function(iter(data))
    return logs.get_value() if isinstance(logs, tf.experimental.Optional) else logs


@pytest.mark.parametrize("jit_compile", [False, True])
def test_canary_one_step_is_what_keras_make_function_builds(jit_compile):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 3)).astype("float32"), rng.normal(size=(8, 1)).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    theirs, ours = _twins(jit_compile)
    with canary("Trainer._make_function (rebuilt by _firewall/train_function.py)"):
        assert list(inspect.signature(theirs._make_function).parameters) == ["step_function"]
        theirs.make_train_function()
        their_logs = _keras_step(theirs, data)
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


def test_the_trace_of_an_element_spec_is_held_and_another_spec_gets_its_own():
    traced_bodies = []

    @tf.function(reduce_retracing=True)
    def doubled(iterator):
        traced_bodies.append(1)  # Python: runs when the function is traced, not when a trace is called
        return iterator.get_next() * 2

    calls = TraceOfSpec(doubled)
    ints = tf.data.Dataset.range(5)
    assert [int(calls(iter(ints))) for _ in range(3)] == [0, 0, 0]
    held = calls.trace
    assert isinstance(held, tf.types.experimental.ConcreteFunction) and len(traced_bodies) == 1
    floats = tf.data.Dataset.from_tensors(tf.constant([1.5, 2.0]))
    assert calls(iter(floats)).numpy().tolist() == [3.0, 4.0]
    assert calls.trace is not held and len(traced_bodies) == 2
    assert int(calls(iter(ints.skip(2)))) == 4  # the first spec again: the tf.function's own trace, not a new one
    assert len(traced_bodies) == 2


def test_functions_run_eagerly_run_the_python_body_every_call():
    bodies = []

    @tf.function
    def first(iterator):
        bodies.append(1)
        return iterator.get_next()

    calls = TraceOfSpec(first)
    tf.config.run_functions_eagerly(True)
    try:
        for _ in range(3):
            calls(iter(tf.data.Dataset.range(2)))
    finally:
        tf.config.run_functions_eagerly(False)
    assert len(bodies) == 3 and calls.trace is None


def test_a_second_dataset_of_another_spec_trains_as_keras_does():
    # each `fit` may bring another dataset: a batch of another static shape is traced again, not fed to the
    # first trace; both steps leave the weights Keras's own train function leaves
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(12, 3)).astype("float32"), rng.normal(size=(12, 1)).astype("float32")
    first = tf.data.Dataset.from_tensor_slices((x, y)).batch(4, drop_remainder=True)
    second = tf.data.Dataset.from_tensor_slices((x, y)).batch(3, drop_remainder=True)
    theirs, ours = _twins(False)
    theirs.make_train_function()
    timed = timed_train_function(ours)
    for data in (first, second, first):
        their_logs = _keras_step(theirs, data)
        our_logs = timed(iter(data))
        assert np.array_equal(np.asarray(our_logs["loss"]), np.asarray(their_logs["loss"]))
    for mine, keras_own in zip(ours.weights, theirs.weights):
        assert np.array_equal(mine.numpy(), keras_own.numpy()), mine.path
