"""The optimizer's apply: a context records each update and hands it to its own `intercept_apply`.

The firewall's `FirewallContext` is one such context (`tfguard._firewall.apply_interception`);
here the interception is checked with contexts written in the test, so the hooks
are shown to need nothing of the firewall's.
"""

import keras
import numpy as np
import tensorflow as tf

from tfguard._hooks import context


def _model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    return model


_BATCH = (tf.ones((4, 2)), tf.fill((4, 1), 3.0))


def test_a_step_context_records_each_update_and_lets_it_through():
    model = _model()
    before = [w.copy() for w in model.get_weights()]
    step = context.StepContext(model)
    with step.active():
        model.train_step(_BATCH)
    assert [len(u.variables) for u in step.updates] == [2] and step.updates[0].optimizer is model.optimizer
    assert all(not np.array_equal(b, a) for b, a in zip(before, model.get_weights()))


class _Closed(context.StepContext):
    """A context whose interception records every update and applies none."""

    def intercept_apply(self, optimizer, gradients, variables, scale, apply):
        self.record_update(optimizer, gradients, variables, scale)
        self.refused = getattr(self, "refused", 0) + 1


def test_a_context_that_overrides_intercept_apply_decides_whether_an_update_is_applied():
    model = _model()
    before = [w.copy() for w in model.get_weights()]
    step = _Closed(model)
    with step.active():
        model.train_step(_BATCH)
    assert step.refused == 1 and len(step.updates) == 1
    assert all(np.array_equal(b, a) for b, a in zip(before, model.get_weights()))
    assert int(model.optimizer.iterations.numpy()) == 0


def test_variables_given_as_a_generator_reach_both_the_interception_and_keras():
    # The interception lists the variables; a generator it used up would reach Keras's apply empty, and
    # nothing would be written while the iterations still moved.
    model = _model()  # SGD(0.5)
    kernel = model.trainable_variables[0].numpy()
    grads = [tf.ones_like(v) for v in model.trainable_variables]
    step = context.StepContext(model)
    with step.active():
        model.optimizer.apply(grads, (v for v in model.trainable_variables))
    assert len(step.updates[0].variables) == 2
    np.testing.assert_allclose(model.trainable_variables[0].numpy(), kernel - 0.5)


def test_a_loss_scale_optimizers_update_is_one_update_its_inner_apply_is_part_of_it():
    # The inner optimizer applies inside the loss scale's cond: counted as an update of the step's own
    # control flow, it made the guard warn on every mixed-precision model that its updates were out of reach.
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    model.optimizer.build(model.trainable_variables)  # as Keras's fit does before its first step
    seen = {}

    @tf.function
    def traced(x, y):
        step = context.StepContext(model)
        with step.active():
            model.train_step((x, y))
        seen["graph"] = (len(step.updates), step.nested_updates, step.updates[0].scale is not None)
        return tf.constant(0)

    eager = context.StepContext(model)
    with eager.active():
        model.train_step(_BATCH)
    traced(*_BATCH)
    assert seen["graph"] == (1, 0, True)
    assert (len(eager.updates), eager.nested_updates, eager.updates[0].scale is not None) == (1, 0, True)
