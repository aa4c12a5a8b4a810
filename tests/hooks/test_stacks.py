"""Small tensors of one shape, stacked: which go together, and reading rows of a stack back."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfguard._hooks.stacks import STACKABLE, stack_groups, take_rows


def test_tensors_of_one_shape_and_dtype_go_together_in_order_and_the_others_alone():
    kernel, bias = (tf.TensorShape([4, 4]), tf.float32), (tf.TensorShape([4]), tf.float32)
    half = (tf.TensorShape([4, 4]), tf.float16)  # the same shape, another dtype
    large = (tf.TensorShape([STACKABLE + 1]), tf.float32)
    unknown = (tf.TensorShape([None, 4]), tf.float32)
    shapes = [kernel, bias, kernel, half, large, bias, unknown, kernel]
    assert stack_groups(shapes) == [[0, 2, 7], [1, 5], [3], [4], [6]]
    assert stack_groups([(None, tf.float32)]) == [[0]]


def test_a_group_holds_at_most_the_values_it_is_allowed():
    kernel = (tf.TensorShape([4, 4]), tf.float32)  # 16 values each
    assert stack_groups([kernel] * 5, most=48) == [[0, 1, 2], [3, 4]]
    assert stack_groups([kernel] * 2, most=8) == [[0], [1]]  # one alone is never split


def test_rows_of_a_stack_are_the_stack_itself_when_all_are_taken_in_order():
    stack = tf.constant(np.arange(12, dtype="float32").reshape(3, 4))
    assert take_rows(stack, [0, 1, 2]) is stack
    np.testing.assert_array_equal(take_rows(stack, [2, 0]).numpy(), stack.numpy()[[2, 0]])
    np.testing.assert_array_equal(take_rows(stack, [0, 1]).numpy(), stack.numpy()[:2])


def test_a_stack_of_unknown_length_is_taken_whole_when_its_size_is_given():
    @tf.function(input_signature=[tf.TensorSpec([None, 2])])
    def whole(stack):
        taken = take_rows(stack, [0, 1], size=2)
        assert taken is stack  # no gather in the graph
        return taken

    np.testing.assert_array_equal(whole(tf.ones([2, 2])).numpy(), np.ones((2, 2)))
