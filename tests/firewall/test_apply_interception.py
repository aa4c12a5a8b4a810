"""The firewall's apply interception: what a `FirewallContext` holds and takes at each optimizer update."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tfguard._firewall.apply_interception import FirewallContext
from tfguard._hooks import context
from tfguard._hooks.context import add_outside_interceptor, remove_outside_interceptor

_BATCH = (tf.constant([[1.0, -2.0], [0.5, 3.0], [0.0, 1.0], [2.0, 2.0]]), tf.fill((4, 1), 3.0))


def _model(optimizer="sgd"):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")
    return model


def test_a_restoring_context_holds_a_small_models_variables_stacked_and_a_gated_ones_as_read():
    # Stacked, the held values are copies and the step writes in place; a model whose updates are gated
    # never restores their variables, and an unused read costs no copy where a stack would.
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4), keras.layers.Dense(4)])
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    rows = {}

    for hold_bytes in (2**20, 0):
        @tf.function
        def step(hold_bytes=hold_bytes):
            context = FirewallContext(model, restores=True, hold_bytes=hold_bytes)
            rows[hold_bytes] = [h.row for h in context.transaction.held]
            return tf.constant(0)

        step()
    held = len(model.variables) + len(model.metrics_variables) + len(model.optimizer.variables)
    assert len(rows[2**20]) == held
    assert any(row is not None for row in rows[2**20])  # the two kernels, the two biases, their slots
    assert len(rows[0]) == held and all(row is None for row in rows[0])


def test_a_context_that_does_not_restore_holds_nothing():
    model = _model()
    context = FirewallContext(model)
    with context.active():
        model.train_step(_BATCH)
    assert context.transaction.held == [] and len(context.updates) == 1


def test_on_a_recording_step_the_apply_interception_takes_each_gradients_squared_norm_zeros_and_size():
    model = _model()
    for recording in (True, False):
        context = FirewallContext(model, record_flag=tf.constant(recording))
        with context.active():
            model.train_step(_BATCH)
        (update,) = context.updates
        for variable, grad in zip(update.variables, update.gradients):
            table, row = context.gradient_stats[id(variable)]
            g = np.asarray(grad)
            expected = [float((g ** 2).sum()), float((g == 0).sum()), float(g.size)] if recording else [0, 0, 0]
            np.testing.assert_allclose(np.asarray(table)[row], expected, rtol=1e-6)


def test_a_step_that_does_not_restore_copies_the_weights_before_its_update_on_recording_steps():
    model = _model()
    before = [w.copy() for w in model.get_weights()]
    context = FirewallContext(model, record_flag=tf.constant(True), weights=True)
    with context.active():
        model.train_step(_BATCH)
    assert context.transaction.held == []  # a copy at the apply, nothing held across the update
    for variable, value in zip(model.weights, before):
        assert context.has_before(variable)
        np.testing.assert_array_equal(context.before(variable).numpy(), value)
    assert any(not np.array_equal(v.numpy(), value) for v, value in zip(model.weights, before))


class _Counting:
    def __init__(self):
        self.seen = []

    def intercept_apply(self, optimizer, gradients, variables, scale, apply):
        self.seen.append(len(gradients))
        return apply(gradients)


def test_an_update_outside_any_step_goes_through_the_outside_interceptor_until_it_is_removed():
    model = _model()
    optimizer = keras.optimizers.SGD(0.1)
    interceptor = _Counting()
    grads = [tf.ones_like(v) for v in model.trainable_variables]
    add_outside_interceptor(interceptor)
    try:
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    finally:
        remove_outside_interceptor(interceptor)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    assert interceptor.seen == [4]
    assert int(optimizer.iterations.numpy()) == 2


def test_variables_given_as_a_generator_reach_both_the_outside_interceptor_and_keras():
    # The interception lists the variables; a generator it used up would reach Keras's apply empty.
    model = _model(keras.optimizers.SGD(0.5))
    kernel = model.trainable_variables[0].numpy()
    grads = [tf.ones_like(v) for v in model.trainable_variables]
    interceptor = _Counting()
    add_outside_interceptor(interceptor)
    try:
        model.optimizer.apply(grads, (v for v in model.trainable_variables))
    finally:
        remove_outside_interceptor(interceptor)
    assert interceptor.seen == [4]
    np.testing.assert_allclose(model.trainable_variables[0].numpy(), kernel - 0.5)


def test_one_wrapper_of_apply_serves_every_context_and_each_update_is_seen_once():
    # One wrapper per class: it hands each update to the active context's `intercept_apply` (the firewall's is a
    # FirewallContext's intercept_apply), and a plain StepContext (a replay's) records it.
    context.uninstall()
    model = _model()
    guarded = FirewallContext(model)
    with guarded.active():
        model.train_step(_BATCH)
    for cls, _ in context.apply_classes():
        wrapper = cls.__dict__["apply"]
        assert getattr(wrapper, "_tfguard_wrapped", None) is not None
        assert getattr(wrapper._tfguard_wrapped, "_tfguard_wrapped", None) is None  # not wrapped twice
    plain = context.StepContext(model)
    with plain.active():
        model.train_step(_BATCH)
    assert len(guarded.updates) == 1 and len(plain.updates) == 1
    assert int(model.optimizer.iterations.numpy()) == 2
