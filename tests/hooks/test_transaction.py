"""The transaction: what a step may change is held before it changes and put back bitwise on a rejected step."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfguard._hooks.stacks import STACKABLE
from tfguard._hooks.transaction import Transaction


def _variables():
    small = [tf.Variable(np.full((3, 2), float(i), "float32")) for i in range(4)]
    odd = tf.Variable(np.arange(5, dtype="float32"))  # alone of its shape
    large = tf.Variable(np.ones(STACKABLE + 1, "float32"))
    return small, odd, large


def test_a_rejected_step_puts_every_held_value_back_bitwise_in_a_graph():
    small, odd, large = _variables()
    everything = [*small, odd, large]
    start = [v.numpy().copy() for v in everything]

    @tf.function
    def step(reject):
        txn = Transaction()
        txn.hold(everything, stack=True)
        for v in everything:
            v.assign_add(tf.fill(tf.shape(v), 0.5))
        txn.restore_if(reject)

    step(tf.constant(True))
    assert all(np.array_equal(v.numpy(), s) for v, s in zip(everything, start))
    step(tf.constant(False))
    assert all(np.array_equal(v.numpy(), s + 0.5) for v, s in zip(everything, start))


def test_small_variables_of_one_shape_are_held_as_one_stack_so_the_step_writes_them_in_place():
    # A value read and held across the step made each in-place write copy its variable first, on
    # every step; a stack is a copy of its own, taken once, and its rows are sliced only to restore.
    small, odd, large = _variables()
    holds = {}

    @tf.function
    def step():
        txn = Transaction()
        txn.hold([*small, odd, large], stack=True)
        holds["rows"] = [h.row for h in txn.held]
        holds["order"] = [h.tf_variable for h in txn.held]
        txn.restore_if(tf.constant(False))

    graph = step.get_concrete_function().graph
    assert holds["rows"] == [0, 1, 2, 3, None, None]
    assert holds["order"] == [*small, odd, large]  # in the order they were held
    packs = [op for op in graph.get_operations() if op.type == "Pack"]
    assert len(packs) == 1 and len(packs[0].inputs) == 4
    slices = [op for op in graph.get_operations() if op.type == "StridedSlice"]
    assert not slices  # in the step's own graph: the rows are sliced inside the restore's branch
