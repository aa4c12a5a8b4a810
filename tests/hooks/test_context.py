"""The optimizer's door: a context records each update and hands it to its own `through_door`.

The firewall works at the door by a context of its own
(`tfguard.firewall.door.FirewallContext`); here the door is checked with
contexts written in the test, so the hooks are shown to need nothing of the
firewall's.
"""

import keras
import numpy as np
import tensorflow as tf

from tfguard.hooks import context


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
    """A context whose door records every update and applies none."""

    def through_door(self, optimizer, gradients, variables, scale, apply):
        self.record_update(optimizer, gradients, variables, scale)
        self.refused = getattr(self, "refused", 0) + 1


def test_a_context_that_overrides_its_door_decides_whether_an_update_is_applied():
    model = _model()
    before = [w.copy() for w in model.get_weights()]
    step = _Closed(model)
    with step.active():
        model.train_step(_BATCH)
    assert step.refused == 1 and len(step.updates) == 1
    assert all(np.array_equal(b, a) for b, a in zip(before, model.get_weights()))
    assert int(model.optimizer.iterations.numpy()) == 0


class _Counting:
    def __init__(self):
        self.seen = []

    def through_door(self, optimizer, gradients, variables, scale, apply):
        self.seen.append(len(gradients))
        return apply()


def test_an_update_outside_any_step_goes_through_the_outside_door_until_it_is_removed():
    model = _model()
    optimizer = keras.optimizers.SGD(0.1)
    door = _Counting()
    grads = [tf.ones_like(v) for v in model.trainable_variables]
    context.add_outside_door(door)
    try:
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    finally:
        context.remove_outside_door(door)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    assert door.seen == [2]
    assert int(optimizer.iterations.numpy()) == 2
