"""The guard wraps any step and a rejected step leaves nothing of the model touched.

Programs shaped like the ones users bring (`foreign.py`: a custom
`train_step`, a DCGAN with two optimizers and no `call()`, a VAE compiled
without a loss, a hand-written `GradientTape` loop) each get one NaN at a
known batch. The step is rejected, the batch is named by where it sat, every
variable of the model, its metrics and its optimizers is bitwise what it was
before the step, and training goes on under `skip`.
"""

from __future__ import annotations

import json
import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfguard
from tests.firewall import foreign
from tfguard import GuardViolation

BAD_ROW = 20  # batch 1 of 16


def _program(name, jit_compile=False):
    """`(model, fit args, optimizers)` of a foreign program, with a NaN in batch 1."""
    if name == "fit":
        model = foreign.bn_model(jit_compile=jit_compile)
        x = np.random.default_rng(0).random((64, 4), dtype=np.float32)
        args = (x, np.arange(64) % 3)
    elif name in ("custom_step", "custom_step_mixed"):
        model, x, y = getattr(foreign, name)(jit_compile=jit_compile)
        args = (x, y)
    else:
        model, x = getattr(foreign, name)(jit_compile=jit_compile)
        args = (x,)
    args[0][BAD_ROW] = np.nan
    optimizers = [model.optimizer] + [getattr(model, n) for n in ("d_optimizer", "g_optimizer")
                                      if hasattr(model, n)]
    return model, args, optimizers


class StateAtBatch(keras.callbacks.Callback):
    """Keeps every variable of the model, its metrics and its optimizers around one batch."""

    def __init__(self, batch, owners):
        super().__init__()
        self.batch, self.owners = batch, owners
        self.before = self.after = None

    def on_train_batch_begin(self, batch, logs=None):
        if batch == self.batch:
            self.before = foreign.state_of(*self.owners)

    def on_train_batch_end(self, batch, logs=None):
        if batch == self.batch:
            self.after = foreign.state_of(*self.owners)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("name", ["fit", "custom_step", "custom_step_mixed", "gan", "vae"])
def test_a_nan_batch_is_rejected_and_leaves_every_variable_bitwise(name, jit_compile):
    model, args, optimizers = _program(name, jit_compile)
    tfguard.guard(model, policy="skip", quarantine_dir=None)
    model.fit(*(a[:16] for a in args), batch_size=16, verbose=0)  # builds optimizers and metrics
    spy = StateAtBatch(1, [model, *optimizers])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)  # the coverage note of a custom step
        history = model.fit(*args, batch_size=16, epochs=2, shuffle=False, verbose=0, callbacks=[spy])
    assert spy.before is not None and foreign.bitwise_equal(spy.before, spy.after)
    events = tfguard.guard_events(model)
    assert [(e.batch, e.epoch, e.epoch_batch) for e in events] == [(2, 0, 1), (6, 1, 1)]
    assert events[0].stage == "data" and events[0].action == "skipped"
    assert "at batch 2 (epoch 0, batch 1 of the epoch)" in events[0].message
    assert history.history["guard_skipped"] == [1.0, 1.0]
    assert all(np.isfinite(v).all() for v in foreign.state_of(model, *optimizers) if v.dtype.kind == "f")
    # training went on: the good batches moved the weights
    assert not foreign.bitwise_equal(spy.after, foreign.state_of(model, *optimizers))


def test_a_hand_written_loop_is_guarded_in_one_line():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.BatchNormalization(), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam(1e-2)
    train_step = foreign.loop_step(model, optimizer, keras.losses.MeanSquaredError())
    step = tfguard.guard_step(train_step, model, policy="skip", quarantine_dir=None)
    rng = np.random.default_rng(0)
    batches = [(rng.random((16, 4), dtype=np.float32), rng.random((16, 1), dtype=np.float32))
               for _ in range(5)]
    batches[3][0][2, 1] = np.nan
    for index, (x, y) in enumerate(batches):
        if index == 3:
            before = foreign.state_of(model, optimizer)
        step(tf.constant(x), tf.constant(y))
        if index == 3:
            assert foreign.bitwise_equal(before, foreign.state_of(model, optimizer))
    assert [(e.batch, e.stage, e.where) for e in step.events] == [(3, "data", "argument 0")]
    assert int(optimizer.iterations.numpy()) == 4  # the four good steps
    assert all(np.isfinite(v).all() for v in foreign.state_of(model, optimizer) if v.dtype.kind == "f")


def test_a_hand_written_loop_raises_by_default_naming_the_loss():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name="d")])
    optimizer = keras.optimizers.SGD(0.1)

    def train_step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.math.log(model(x)))  # log of a negative: a NaN loss
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        return loss

    model.layers[0].set_weights([np.array([[1.0], [1.0]], "float32"), np.zeros(1, "float32")])
    step = tfguard.guard_step(train_step, model, quarantine_dir=None)
    with pytest.raises(GuardViolation) as info:
        step(tf.constant([[-1.0, -1.0]]))
    assert info.value.stage == "loss" and info.value.batch == 0
    assert str(info.value).startswith("returned value at batch 0 has 1 NaN")
    np.testing.assert_array_equal(model.layers[0].get_weights()[0], [[1.0], [1.0]])


@pytest.mark.parametrize("policy", ["raise", "skip", "warn"])
def test_batch_normalization_statistics_survive_a_nan_batch(policy, tmp_path):
    model = foreign.bn_model()
    x = np.random.default_rng(0).random((48, 4), dtype=np.float32)
    y = np.arange(48) % 3
    tfguard.guard(model, policy=policy, quarantine_dir=str(tmp_path))
    model.fit(x[:16], y[:16], batch_size=16, verbose=0)
    bn = model.get_layer("bn")
    before = foreign.state_of(model, model.optimizer, metrics=False)
    bad = x[16:32].copy()
    bad[3, 0] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        if policy == "raise":
            with pytest.raises(GuardViolation):
                model.fit(bad, y[16:32], batch_size=16, verbose=0)
        else:
            history = model.fit(bad, y[16:32], batch_size=16, verbose=0)
            assert history.history["guard_skipped"] == [1.0]
    after = foreign.state_of(model, model.optimizer, metrics=False)
    assert foreign.bitwise_equal(before, after)
    assert np.isfinite(bn.moving_mean.numpy()).all() and np.isfinite(bn.moving_variance.numpy()).all()
    assert np.isfinite(model.predict(x, verbose=0)).all()


@pytest.mark.parametrize("policy", ["raise", "skip", "warn"])
def test_a_custom_stateful_layer_is_rolled_back(policy):
    model = foreign.stateful_model()
    x = np.random.default_rng(0).random((32, 4), dtype=np.float32)
    y = np.arange(32) % 3
    tfguard.guard(model, policy=policy, quarantine_dir=None)
    model.fit(x[:16], y[:16], batch_size=16, verbose=0)
    counter = model.get_layer("counter")
    seen = counter.seen.numpy().copy()
    total = counter.total.numpy().copy()
    bad = x[16:].copy()
    bad[0, 0] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        try:
            model.fit(bad, y[16:], batch_size=16, verbose=0)
        except GuardViolation:
            assert policy == "raise"
    assert counter.seen.numpy() == seen and np.array_equal(counter.total.numpy(), total)
    model.fit(x[16:], y[16:], batch_size=16, verbose=0)
    assert counter.seen.numpy() == seen + 16  # a good batch still counts


@pytest.mark.parametrize("policy", ["raise", "skip", "warn"])
def test_an_update_that_overflows_is_rejected(policy):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="d")])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=1e38), loss="mse")
    x = np.random.default_rng(0).random((16, 4), dtype=np.float32)
    y = np.full((16, 3), 10.0, np.float32)  # finite gradients; lr * gradient overflows float32
    tfguard.guard(model, policy=policy, quarantine_dir=None)
    before = foreign.state_of(model, model.optimizer, metrics=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if policy == "raise":
            with pytest.raises(GuardViolation) as info:
                model.fit(x, y, batch_size=16, verbose=0)
            assert info.value.stage == "update" and "d/kernel" in info.value.where
            assert "would have" in str(info.value) and "lower the learning rate" in str(info.value)
        else:
            model.fit(x, y, batch_size=16, verbose=0)
    assert foreign.bitwise_equal(before, foreign.state_of(model, model.optimizer, metrics=False))
    events = tfguard.guard_events(model)
    assert events and events[0].stage == "update" and not events[0].applied
    if policy == "warn":
        assert any("The update was not applied" in str(w.message) for w in caught)


def test_the_optimizer_slots_of_a_rejected_step_stay_put_under_adam():
    model, args, optimizers = _program("fit")
    tfguard.guard(model, policy="skip", quarantine_dir=None)
    model.fit(*(a[:16] for a in args), batch_size=16, verbose=0)
    iterations = int(model.optimizer.iterations.numpy())
    slots = [v.numpy().copy() for v in model.optimizer.variables]
    model.fit(*(a[16:32] for a in args), batch_size=16, verbose=0)  # holds the NaN row
    assert int(model.optimizer.iterations.numpy()) == iterations
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(slots, model.optimizer.variables))


def test_skipped_steps_are_named_by_the_batch_not_the_optimizer_step(tmp_path):
    model = foreign.bn_model()
    x = np.ones((64, 4), np.float32)
    x[::16, 0] = np.nan  # every batch of 16 is bad
    tfguard.guard(model, policy="skip", quarantine_dir=str(tmp_path), max_consecutive_skips=100,
                  max_quarantined=3, localize=False)
    model.fit(x, np.arange(64) % 3, batch_size=16, epochs=2, verbose=0, shuffle=False)
    events = tfguard.guard_events(model)
    assert [e.batch for e in events] == list(range(8))
    assert [e.step for e in events] == [0] * 8  # the optimizer never moved
    folders = sorted(os.listdir(tmp_path / model.name))
    assert folders == ["batch-00000000", "batch-00000001", "batch-00000002"]
    meta = json.loads((tmp_path / model.name / "batch-00000002" / "meta.json").read_text())
    assert (meta["batch"], meta["epoch"], meta["epoch_batch"]) == (2, 0, 2)


def _unwritable(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    return str(blocker / "quarantine")  # makedirs under a file fails, even for root


@pytest.mark.parametrize("policy", ["skip", "warn"])
def test_a_quarantine_that_cannot_be_written_never_stops_training(policy, tmp_path):
    model = foreign.bn_model()
    x = np.random.default_rng(0).random((48, 4), dtype=np.float32)
    x[[5, 21], 0] = np.nan
    target = _unwritable(tmp_path)
    tfguard.guard(model, policy=policy, quarantine_dir=target)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(x, np.arange(48) % 3, batch_size=16, verbose=0, shuffle=False)
    notes = [str(w.message) for w in caught if "could not be saved" in str(w.message)]
    assert len([n for n in notes if n.startswith("tfguard:")]) == 1  # one clear warning
    assert target in notes[0] and "NotADirectoryError" in notes[0] and "writable" in notes[0]
    assert history.history["guard_violations"] == [2.0]
    events = tfguard.guard_events(model)
    assert all(e.quarantine is None and "NotADirectoryError" in e.quarantine_error for e in events)


def test_under_raise_the_write_failure_is_in_the_message(tmp_path):
    model = foreign.bn_model()
    x = np.random.default_rng(0).random((16, 4), dtype=np.float32)
    x[5, 0] = np.nan
    tfguard.guard(model, policy="raise", quarantine_dir=_unwritable(tmp_path))
    with pytest.raises(GuardViolation) as info:
        model.fit(x, np.arange(16) % 3, batch_size=16, verbose=0)
    assert "could not be saved" in str(info.value) and "NotADirectoryError" in str(info.value)
    assert info.value.quarantine is None


class ScriptLayer(keras.layers.Layer):
    """A custom layer defined in a training script (not registered): safe_mode cannot load it."""

    def call(self, inputs):
        return tf.math.log(inputs)


def test_the_live_model_localizes_and_the_replay_is_stored(tmp_path):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((2,))
    h = keras.layers.Dense(2, name="dense", kernel_initializer="identity")(inputs)
    model = keras.Model(inputs, ScriptLayer(name="log")(h))
    model.compile(optimizer="sgd", loss="mse")
    tfguard.guard(model, policy="skip", quarantine_dir=str(tmp_path))
    x = -np.abs(np.random.default_rng(0).normal(size=(8, 2))).astype("float32")
    model.fit(x, np.zeros((8, 2), "float32"), batch_size=8, verbose=0)
    event = tfguard.guard_events(model)[0]
    assert event.replay is not None and event.replay.first_layer == "log"
    assert "First non-finite layer on replay: 'log'" in event.message  # under skip too
    stored = tfguard.load_quarantine(event.quarantine).stored_replay()
    assert stored["report"]["first_layer"] == "log" and stored["report"]["op_type"] == "Log"
    assert any(path.endswith("test_any_step.py") for path in stored["defined_in"])
