"""The in-graph statistics agree with a plain NumPy reading, eagerly, in a graph and under XLA (histograms: test_buckets.py)."""

import numpy as np
import pytest
import tensorflow as tf

from tfguard._signals import stats

RNG = np.random.default_rng(7)


def _graph(function, count: int, *, xla: bool = False, unknown_shapes: bool = False):
    signature = [tf.TensorSpec(None, tf.float32)] * count if unknown_shapes else None

    @tf.autograph.experimental.do_not_convert
    def call(*tensors):
        return function(list(tensors))

    return tf.function(call, jit_compile=xla, input_signature=signature)


def _reference_dead(values: np.ndarray) -> float:
    units = values.reshape(-1, values.shape[-1]) if values.ndim else values.reshape(1, 1)
    return float(1.0 - (units.max(axis=0) > 0).mean())


@pytest.mark.parametrize("mode", ["eager", "xla", "unknown shapes"])
def test_dead_fractions_count_units_never_positive(mode):
    values = [
        np.maximum(RNG.normal(size=(8, 5, 5, 6)), 0).astype("float32"),
        np.array([[0.0, 1.0, -2.0], [0.0, 0.0, -1.0]], "float32"),  # 2 of 3 units dead
        np.array([-1.0, 2.0, 0.0], "float32"),  # one axis: the units are its values
        np.zeros((4, 3), "float32"),  # all dead
    ]
    values[0][..., 2] = 0.0  # one dead channel
    tensors = [tf.constant(v) for v in values]
    if mode == "eager":
        got = stats.dead_fractions(tensors)
    else:
        got = _graph(stats.dead_fractions, len(values), xla=mode == "xla",
                     unknown_shapes=mode == "unknown shapes")(*tensors)
    np.testing.assert_allclose(got.numpy(), [_reference_dead(v) for v in values], rtol=1e-6)


def test_all_finite_sums_small_tensors_of_one_shape_together_and_still_finds_one_nan():
    rng = np.random.default_rng(1)
    good = [tf.constant(rng.random((32, 32), dtype=np.float32)) for _ in range(100)]
    bad = list(good)
    poisoned = rng.random((32, 32), dtype=np.float32)
    poisoned[3, 4] = np.nan
    bad[57] = tf.constant(poisoned)

    @tf.function
    def check(ts):
        return stats.Reducer().all_finite(ts)

    assert bool(check(good)) and not bool(check(bad))
    graph = check.get_concrete_function(good).graph
    assert sum(op.type == "Sum" for op in graph.get_operations()) <= 2  # one per shape, not one per tensor


def test_all_finite_adds_float32_tensors_of_one_shape_without_copying_them_into_a_stack():
    ts = [tf.fill([32, 32], float(i)) for i in range(50)]

    @tf.function
    def check(ts):
        return stats.Reducer().all_finite(ts)

    ops = [op.type for op in check.get_concrete_function(ts).graph.get_operations()]
    assert "AddN" in ops and "Pack" not in ops[:ops.index("AddN")]  # no [50, 32, 32] copy before the sum
    infinite = list(ts)
    infinite[9] = tf.tensor_scatter_nd_update(ts[9], [[0, 0]], [float("inf")])
    assert bool(check(ts)) and not bool(check(infinite))


def test_all_finite_sums_half_precision_tensors_in_float32_so_large_finite_values_pass():
    large = [tf.fill([8, 8], tf.constant(60000.0, tf.float16)) for _ in range(4)]  # their fp16 sum overflows
    assert bool(tf.function(lambda ts: stats.Reducer().all_finite(ts))(large))
    nan = list(large)
    nan[2] = tf.tensor_scatter_nd_update(large[2], [[1, 1]], tf.constant([float("nan")], tf.float16))
    assert not bool(tf.function(lambda ts: stats.Reducer().all_finite(ts))(nan))


@pytest.mark.parametrize("shape", [(64, 26, 26, 32), (5, 26, 26, 32), (2, 512, 512, 3), (8, 4), (300,), (3, 70000)])
def test_a_sample_holds_at_most_its_bound_known_without_the_batch_size(shape):
    values = tf.zeros(shape)
    size = int(tf.size(stats.leading_examples(values)))
    assert size == stats.sample_bound(values)  # exact when the batch size is known
    if len(shape) > 1:  # a vector is returned whole: no bound without its size
        any_batch = stats.sample_bound(tf.TensorSpec([None, *shape[1:]]))
        assert size <= any_batch <= stats.ACTIVATION_SAMPLE


def test_gradient_rows_of_one_shape_come_from_one_stack_and_match_numpy():
    rng = np.random.default_rng(0)
    shapes = [(3, 3), (3,), (3, 3), (5,), (3, 3), (3,), (70000,)]  # the last too large to stack
    values = [rng.normal(size=shape).astype("float32") for shape in shapes]
    values[1][0] = 0.0
    values[2][1, :] = 0.0
    tensors = [tf.constant(v) for v in values]
    rows = tf.function(stats.gradient_rows)
    expected = [[float((v.astype("float64") ** 2).sum()), float((v == 0).sum()), float(v.size)] for v in values]
    np.testing.assert_allclose(rows(tensors).numpy(), expected, rtol=1e-5)
    ops = [op.type for op in rows.get_concrete_function(tensors).graph.get_operations()]
    assert ops.count("L2Loss") == 2  # the (5,) and the large one alone; the others by their stacks
