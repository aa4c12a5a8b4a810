"""What an optimizer says now: its step (`iterations`) and its learning rate, each read one way.

Every summary tfguard writes sits at one global step, the optimizer's
`iterations` (a variable, so it holds inside `tf.function`); the Logger,
`LiveDiagnosis`, the invariant watch, the firewall's instrumentation and the
multi-worker translation all read it through `optimizer_step` and
`model_step`. The learning rate is read through `learning_rate`, which looks
through a `LossScaleOptimizer` (mixed precision) to the optimizer inside and
evaluates a schedule at the current step; `learning_rate_is_fixed` tells a
number that can be set from a schedule or a callable that cannot.

Example:

>>> import keras
>>> optimizer = keras.optimizers.SGD(0.1)
>>> optimizer_step(optimizer), round(learning_rate(optimizer), 3), learning_rate_is_fixed(optimizer)
(0, 0.1, True)
>>> scaled = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-3))
>>> type(unwrapped(scaled)).__name__, round(learning_rate(scaled), 4)
('Adam', 0.001)
>>> decay = keras.optimizers.schedules.ExponentialDecay(0.5, decay_steps=10, decay_rate=0.5)
>>> learning_rate(keras.optimizers.SGD(decay)), learning_rate_is_fixed(keras.optimizers.SGD(decay))
(0.5, False)
>>> learning_rate(None), model_step(keras.Sequential([keras.Input((1,))]))
(None, 0)
"""

from __future__ import annotations

import keras


def step_counter(optimizer):
    """The variable that counts the updates an optimizer applied: its `iterations`, through a `LossScaleOptimizer`.

    From Keras 3.9 a `LossScaleOptimizer`'s `iterations` is its inner
    optimizer's; in Keras 3.8 and older the wrapper has a counter of its own
    that never moves, while the inner optimizer counts every update applied
    (an overflowing step applies none). The inner counter is right on both.

    Example:

    >>> import keras
    >>> inner = keras.optimizers.SGD()
    >>> step_counter(keras.optimizers.LossScaleOptimizer(inner)) is inner.iterations
    True
    """
    return unwrapped(optimizer).iterations


def optimizer_step(optimizer) -> int:
    """The optimizer's `iterations` as a Python int: the steps it has applied.

    Args:
        optimizer: a Keras optimizer (a `LossScaleOptimizer` counts its inner optimizer's steps).

    Returns:
        The step count; it does not move on a step whose update was skipped.
    """
    return int(keras.ops.convert_to_numpy(step_counter(optimizer)))


def model_step(model, default=0):
    """The global step of a model: its compiled optimizer's `iterations`, or `default`.

    Args:
        model: a Keras model (compiled or not) or any object with an
            `optimizer` attribute.
        default: what a model without an optimizer gives. Defaults to `0`.

    Returns:
        The step as an int, or `default`.
    """
    optimizer = getattr(model, "optimizer", None)
    return default if optimizer is None else optimizer_step(optimizer)


def unwrapped(optimizer):
    """The optimizer that holds the learning rate: the inner one of a `LossScaleOptimizer`.

    Args:
        optimizer: a Keras optimizer, a wrapper with `inner_optimizer`, or `None`.

    Returns:
        `optimizer.inner_optimizer` when there is one, else `optimizer`.
    """
    inner = getattr(optimizer, "inner_optimizer", None)
    return optimizer if inner is None else inner


def learning_rate(optimizer) -> float | None:
    """The optimizer's learning rate now, as a float, or `None` when there is none to read.

    A schedule is evaluated at the optimizer's current step (what the next
    update will use); a `LossScaleOptimizer` gives its inner optimizer's rate.

    Args:
        optimizer: a Keras optimizer or `None`.

    Returns:
        The rate, or `None` for no optimizer or a rate that is not one number.
    """
    if optimizer is None:
        return None
    try:
        return float(keras.ops.convert_to_numpy(unwrapped(optimizer).learning_rate))
    except Exception:  # a learning rate that is not a number (a callable of no argument failing)
        return None


def learning_rate_is_fixed(optimizer) -> bool:
    """Whether the learning rate is a number held in a variable (it can be set), not a schedule.

    Keras keeps a number in a variable and hands a schedule's (or a
    callable's) value back as a new tensor at each read; only the first can
    be set to a new value without replacing what the user wrote.

    Args:
        optimizer: a Keras optimizer (a `LossScaleOptimizer` is looked through).

    Returns:
        `True` for a fixed rate, `False` for a schedule or a callable.
    """
    return isinstance(unwrapped(optimizer).learning_rate, keras.Variable)


__all__ = ["learning_rate", "learning_rate_is_fixed", "model_step", "optimizer_step", "step_counter", "unwrapped"]
