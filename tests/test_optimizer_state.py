"""The one reader of an optimizer's step and learning rate (`tfguard._optimizer_state`).

The cases the old readers disagreed on: a `LossScaleOptimizer` (only
`lint.describe` looked inside it), a schedule (evaluated at the step, and
not a rate that can be set) and a model without an optimizer.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfguard._optimizer_state import (
    learning_rate,
    learning_rate_is_fixed,
    model_step,
    optimizer_step,
    unwrapped,
)


def _trained(optimizer, steps: int) -> keras.Model:
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")
    model.fit(np.ones((4 * steps, 2), "float32"), np.ones((4 * steps, 1)), batch_size=4, verbose=0)
    return model


def test_the_step_is_the_optimizers_iterations_after_training():
    model = _trained(keras.optimizers.SGD(0.01), steps=3)
    assert optimizer_step(model.optimizer) == 3
    assert model_step(model) == 3


def test_a_model_without_an_optimizer_gives_the_default_step():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert model_step(model) == 0
    assert model_step(model, default=None) is None


def test_a_loss_scale_optimizer_is_read_through_to_its_inner_optimizer():
    inner = keras.optimizers.SGD(0.25)
    scaled = keras.optimizers.LossScaleOptimizer(inner)
    assert unwrapped(scaled) is inner
    assert learning_rate(scaled) == pytest.approx(0.25)
    assert learning_rate_is_fixed(scaled)


def test_a_schedule_is_evaluated_at_the_current_step_and_is_not_fixed():
    decay = keras.optimizers.schedules.PiecewiseConstantDecay([2], [0.5, 0.125])
    model = _trained(keras.optimizers.SGD(decay), steps=3)
    assert learning_rate(model.optimizer) == pytest.approx(0.125)
    assert not learning_rate_is_fixed(model.optimizer)
    wrapped = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(decay))
    assert learning_rate(wrapped) == pytest.approx(0.5)
    assert not learning_rate_is_fixed(wrapped)


def test_a_callable_rate_is_read_and_is_not_fixed():
    optimizer = keras.optimizers.SGD(lambda: 0.3)
    assert learning_rate(optimizer) == pytest.approx(0.3)
    assert not learning_rate_is_fixed(optimizer)


def test_no_optimizer_has_no_learning_rate():
    assert learning_rate(None) is None
