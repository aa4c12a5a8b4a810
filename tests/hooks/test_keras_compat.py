"""The private Keras surface tfguard touches, checked: a Keras release that changes it fails here first.

Each test names the item of `tfguard._hooks.keras_compat` it guards; the
canaries of every private name, one per row of docs/internals.md's table, are in
`tests/hooks/test_keras_surface.py`.
"""

import inspect

import keras
import numpy as np
import tensorflow as tf

from tfguard._hooks import context, keras_compat


def test_every_optimizer_inherits_apply_from_the_wrapped_class():
    for cls in (keras.optimizers.SGD, keras.optimizers.Adam, keras.optimizers.AdamW,
                keras.optimizers.RMSprop, keras.optimizers.Adagrad, keras.optimizers.Nadam):
        owner = next(c for c in cls.__mro__ if "apply" in c.__dict__)
        assert issubclass(owner, keras.optimizers.Optimizer) or issubclass(
            keras_compat.OPTIMIZER_CLASS, owner), cls
        assert cls.apply is keras_compat.OPTIMIZER_CLASS.apply, cls
    # the loss scale optimizer keeps its own apply and calls the inner one inside a cond
    assert "apply" in keras.optimizers.LossScaleOptimizer.__dict__
    assert list(inspect.signature(keras.optimizers.Optimizer.apply).parameters)[:3] == [
        "self", "grads", "trainable_variables"]


def test_apply_gradients_reaches_apply_where_the_interception_sees_it():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    step = context.StepContext(model)
    with step.active():
        model.train_step((tf.ones((2, 2)), tf.ones((2, 1))))
    assert len(step.updates) == 1 and len(step.losses) == 1
    assert step.updates[0].optimizer is model.optimizer


def test_unpack_is_keras_public_unpacking():
    x, y, weights, features = np.ones(2), np.zeros(2), np.full(2, 0.5), {"a": np.ones(2)}

    def same(got, expected):
        return len(got) == 3 and all(g is e for g, e in zip(got, expected))

    assert same(keras_compat.unpack((x, y, weights)), (x, y, weights))
    assert same(keras_compat.unpack((x, y)), (x, y, None))
    assert same(keras_compat.unpack([x, y]), (x, y, None))  # a list is a tuple to Keras
    assert same(keras_compat.unpack((x,)), (x, None, None))
    assert same(keras_compat.unpack(x), (x, None, None))  # a bare batch is inputs only
    assert same(keras_compat.unpack(features), (features, None, None))  # dict inputs stay whole


def test_the_optimizers_of_a_gan_are_found():
    model = keras.Model()
    model.d_optimizer = keras.optimizers.Adam()
    model.g_optimizer = keras.optimizers.Adam()
    inner = keras.optimizers.SGD()
    model.compile(optimizer=keras.optimizers.LossScaleOptimizer(inner))
    found = keras_compat.optimizers_of(model)
    assert model.optimizer in found and inner in found
    assert model.d_optimizer in found and model.g_optimizer in found and len(found) == 4
