"""`step_after`: the one derivation of the global step from a guarded step's outputs.

`fit`'s host and `guard_step` used to differ when the step updated no
optimizer: the host counted applied batches, `guard_step` used the batch
index. Both now count applied batches, as an optimizer's iterations would.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

import tfguard
from tfguard._firewall.step import step_after


def test_the_optimizers_iterations_are_the_step():
    assert step_after({"iterations": np.int64(12), "applied": 0.0}, 11) == (12, True)
    assert step_after({"iterations": np.int64(11), "applied": 0.0}, 11) == (11, False)


def test_without_an_optimizer_the_applied_batches_are_the_steps():
    assert step_after({"applied": np.float32(1.0)}, 4) == (5, True)
    assert step_after({"applied": np.float32(0.0)}, 4) == (4, False)
    assert step_after({}, 4) == (5, True)  # a step with no flag always applies


def test_guard_step_without_an_optimizer_names_a_skipped_batch_by_the_applied_steps():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])

    def step_fn(x):  # no optimizer: the step only computes a loss
        return tf.reduce_mean(model(x))

    step = tfguard.guard_step(step_fn, model, policy="skip", quarantine_dir=None)
    bad = np.ones((2, 2), "float32")
    bad[0, 0] = np.nan
    good = tf.ones((2, 2))
    for x in (good, good, tf.constant(bad), good, tf.constant(bad)):
        step(x)
    # batches 2 and 4 were skipped: 2 steps applied before the first, 3 before the second
    assert [(e.batch, e.step) for e in step.events] == [(2, 2), (4, 3)]
