"""A rejected step's NaN/Inf counts: exact, whatever the sizes, and a bounded working set."""

import numpy as np
import pytest
import tensorflow as tf

from tfguard._firewall.stages import (
    COUNTED_AT_ONCE,
    _counting_runs,
    finite_ok,
    nonfinite_counts,
)


def _tensors():
    rng = np.random.default_rng(0)
    large = rng.standard_normal(2 * COUNTED_AT_ONCE + 7).astype("float32")
    large[[3, COUNTED_AT_ONCE + 1, 2 * COUNTED_AT_ONCE + 6]] = [np.nan, np.inf, np.nan]  # in three blocks
    small = rng.standard_normal((4, 5)).astype("float32")
    small[1, 2] = -np.inf
    wide = np.array([1e300, np.nan, -np.inf], "float64")  # 1e300 is finite in float64
    half = np.array([np.inf, 1.0], "float16")
    return [large, small, wide, half]


EXPECTED = [[2, 1, 0, 2 * COUNTED_AT_ONCE + 7], [0, 0, 1, 20], [1, 0, 1, 3], [0, 1, 0, 2]]


@pytest.mark.parametrize("jit_compile", [False, True])
def test_counts_are_exact_in_blocks_and_runs_with_shapes_known_or_not(jit_compile):
    tensors = _tensors()

    @tf.function(jit_compile=jit_compile)
    def known(*ts):
        return nonfinite_counts(list(ts))

    @tf.function(input_signature=[tf.TensorSpec(None, t.dtype) for t in tensors], jit_compile=jit_compile)
    def unknown(*ts):  # sizes known only at run time (XLA: at compile time): each tensor counted by block
        return nonfinite_counts(list(ts))

    for counts in (known(*tensors), unknown(*tensors)):
        assert counts.numpy().tolist() == EXPECTED


def test_small_tensors_are_counted_together_and_a_large_one_alone():
    small = [tf.zeros([COUNTED_AT_ONCE // 4])] * 5
    assert _counting_runs([*small, tf.zeros([COUNTED_AT_ONCE + 1]), small[0]]) == [[0, 1, 2, 3], [4], [5], [6]]


def test_finite_ok_counts_only_when_a_sum_is_not_finite():
    flags, counts = finite_ok([tf.constant([1.0, 2.0]), tf.constant([float("nan")])], counts=True)
    assert flags.numpy().tolist() == [True, False] and counts.numpy().tolist() == [[0, 0, 0, 2], [1, 0, 0, 1]]
