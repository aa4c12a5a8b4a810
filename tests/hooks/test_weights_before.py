"""Weights copied before an update on recording steps: stacks of those of one shape, one vector of the others."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfguard._hooks.weights_before import copy_before


def _weights():
    rng = np.random.default_rng(3)
    shapes = [(4, 4), (4,), (4, 4), (7,), (4, 4), (4,)]
    return [tf.Variable(rng.normal(size=shape).astype("float32")) for shape in shapes]


def test_weights_of_one_shape_are_copied_as_one_stack_and_the_others_flattened():
    weights = _weights()
    start = [w.numpy().copy() for w in weights]
    copied = copy_before(weights, tf.constant(True))
    for w in weights:
        w.assign(w + 1.0)
    assert len(copied.stacks) == 2 and copied.packed.shape == (7,)  # kernels, biases; the odd one
    for w, value in zip(weights, start):
        np.testing.assert_array_equal(copied.value(w).numpy(), value)
    kernels = [weights[i] for i in (4, 0)]
    np.testing.assert_array_equal(copied.stacked(kernels).numpy(), np.stack([start[4], start[0]]))
    assert copied.stacked([weights[0], weights[1]]) is None  # rows of two stacks
    assert copied.stacked([weights[3]]) is None  # not stacked


def test_in_a_graph_the_copy_is_taken_on_recording_steps_only_and_whole_stacks_need_no_gather():
    weights = _weights()
    start = np.stack([weights[i].numpy() for i in (0, 2, 4)])

    @tf.function
    def step(record):
        copied = copy_before(weights, record)
        kernels = copied.stacked([weights[i] for i in (0, 2, 4)])
        for w in weights:
            w.assign_add(tf.ones_like(w))
        return kernels

    np.testing.assert_array_equal(step(tf.constant(True)).numpy(), start)
    assert step(tf.constant(False)).shape[0] == 0  # nothing read on a step that does not record
    graph = step.get_concrete_function(tf.constant(True)).graph
    assert not any(op.type in ("GatherV2", "ReadVariableOp") for op in graph.get_operations())  # reads in the If
