"""Histogram buckets agree with a plain NumPy reading, eagerly, in a graph and under XLA, packed or chunked."""

import math
import re

import numpy as np
import pytest
import tensorflow as tf

from tests.graphs import foldable
from tests.signals.test_stats import _graph
from tfguard._signals import buckets

RNG = np.random.default_rng(7)
SHAPES = [(3, 4), (0,), (7,), (2, 2, 2), (0, 3), (1,)]


def _tensors():
    values = [RNG.normal(size=shape).astype("float32") for shape in SHAPES]
    values[2][1] = np.nan
    values[3][0, 0, 0] = np.inf
    return values


def _reference_buckets(values: np.ndarray, count: int) -> np.ndarray:
    """TensorBoard buckets as `tfguard._signals.buckets` defines them: finite min-max edges, non-finite counted at 0."""
    x = np.where(np.isfinite(values), values, 0.0).astype(np.float64).ravel()
    if x.size == 0:
        low = high = 0.0
    else:
        low, high = x.min(), x.max()
    width = (high - low) / count if high > low else 1.0
    index = np.clip(np.floor((x - low) / width).astype(int), 0, count - 1)
    counts = np.bincount(index, minlength=count)
    left = low + width * np.arange(count)
    return np.stack([left, left + width, counts], axis=1)


@pytest.mark.parametrize("mode", ["eager", "graph", "xla", "unknown shapes"])
def test_buckets_many_match_each_tensor_on_its_own(mode):
    values = _tensors()
    run = lambda tensors: buckets.buckets_many(tensors, 5)  # noqa: E731
    if mode != "eager":
        run = _graph(run, len(values), xla=mode == "xla", unknown_shapes=mode == "unknown shapes")
    got = run(*[tf.constant(v) for v in values]) if mode != "eager" else run([tf.constant(v) for v in values])
    assert got.shape == (len(values), 5, 3)
    for i, value in enumerate(values):
        np.testing.assert_allclose(got[i].numpy(), _reference_buckets(value, 5), rtol=1e-5, atol=1e-5,
                                   err_msg=f"tensor {i} of shape {value.shape}")


@pytest.mark.parametrize("sizes", [[2, 0, 3], [0, 2], [2, 0], [3], [0], [1, 1, 1, 1]])
@pytest.mark.parametrize("unknown_shapes", [False, True])
def test_segment_ids_name_the_vector_of_each_value(sizes, unknown_shapes):
    expected = np.repeat(np.arange(len(sizes)), sizes).tolist()
    if unknown_shapes:
        got = tf.function(buckets.segment_ids, input_signature=[tf.TensorSpec([None], tf.int32),
                                                                 tf.TensorSpec([], tf.int32)])(
            tf.constant(sizes), tf.constant(sum(sizes)))
    else:
        got = buckets.segment_ids(tf.constant(sizes), sum(sizes))
    assert got.dtype == tf.int32
    assert got.numpy().tolist() == expected


@pytest.mark.parametrize("unrolled", [0, 16], ids=["loop", "static pieces"])
@pytest.mark.parametrize("jit_compile", [None, False, True])
def test_chunked_histograms_are_the_packed_ones_in_bounded_pieces(jit_compile, unrolled):
    rng = np.random.default_rng(0)
    # 7000 and 4000 values: whole chunks and a rest; 2048: whole chunks only
    values = [rng.normal(size=s).astype(np.float32) for s in [(3,), (1000, 7), (50,), (4000,), (300,), (2, 1024)]]
    values[1][5, 2] = np.nan
    values[3][17] = np.inf
    tensors = [tf.constant(v) for v in values]

    def both(*ts):
        return (buckets.buckets_many(list(ts), 30, chunk=1024, unrolled=unrolled),
                buckets.buckets_many(list(ts), 30, chunk=10**9))

    run = both if jit_compile is None else tf.function(both, jit_compile=jit_compile)
    chunked, packed = (t.numpy() for t in run(*tensors))
    np.testing.assert_allclose(chunked, packed, rtol=0, atol=1e-5)
    assert [c[:, 2].sum() for c in chunked] == [v.size for v in values]  # every value counted once
    single = buckets.buckets_chunked(tensors[1], 30, chunk=999, unrolled=unrolled).numpy()
    np.testing.assert_array_equal(single, buckets.buckets_many([tensors[1]], 30, chunk=10**9).numpy()[0])


@pytest.mark.parametrize("sizes", [[5000, 3000], [6000]])
def test_histograms_of_known_sizes_fold_nothing_the_size_of_the_data(sizes):
    # From constant sizes alone the segment ids would be folded into a constant of the group's size, kept by
    # the graph for the life of the step function; `foldable` looks into the called functions too
    concrete = tf.function(lambda *ts: buckets.buckets_many(list(ts), 30)).get_concrete_function(
        *[tf.TensorSpec([n]) for n in sizes])
    assert foldable(concrete.graph, 1000) == []


def test_under_xla_histograms_of_known_sizes_compile_no_constant_the_size_of_the_data():
    # XLA's simplifier folds what it can prove: segment ids from sizes it can know become constants
    # of the group's size (`s32[n]`, `pred[n]`), seconds of compilation for each packed group
    n = 1 << 14
    step = tf.function(lambda x: buckets.buckets_many([x[: n // 2], x[n // 2:]], 30), jit_compile=True)
    x = tf.random.stateless_normal([n], seed=(1, 2))
    hlo = step.experimental_get_compiler_ir(x)(stage="optimized_hlo")
    constants = re.findall(r"= \w+\[([\d,]*)\]\S* constant\(", hlo)
    assert [c for c in constants if c and math.prod(map(int, c.split(","))) >= n // 2] == []
    table = step(x).numpy()
    for row, half in zip(table, (x[: n // 2], x[n // 2:])):
        np.testing.assert_allclose(row, _reference_buckets(half.numpy(), 30), rtol=1e-5, atol=1e-5)


def test_a_large_tensor_of_few_chunks_is_bucketed_without_a_loop():
    # each loop costs the step function two bodies kept for its life; a few static pieces cost ~20 ops each
    def ops(unrolled):
        graph = tf.function(lambda t: buckets.buckets_chunked(t, 30, chunk=1000, unrolled=unrolled)) \
            .get_concrete_function(tf.TensorSpec([3500])).graph
        return [op.type for op in graph.get_operations()]

    assert "While" not in ops(16) and "StatelessWhile" not in ops(16)
    assert {"While", "StatelessWhile"} & set(ops(3))  # 4 chunks: past the limit, a loop


@pytest.mark.parametrize("bounds, groups", [([300, 200, 400, 100], 2), (None, 4)], ids=["bounded", "unbounded"])
def test_tensors_of_unknown_size_are_grouped_by_their_bounds_or_bucketed_alone(bounds, groups):
    # Packed as if they held nothing, a hundred tensors of unknown size made one group of every value
    # (ResNet50's activation samples, traced for any batch size: 11 M values in one pass, ~250 MB)
    values = [RNG.normal(size=n).astype("float32") for n in (300, 200, 400, 100)]
    bucket = tf.function(lambda *ts: buckets.buckets_many(list(ts), 10, chunk=512, bounds=bounds))
    concrete = bucket.get_concrete_function(*[tf.TensorSpec([None])] * len(values))
    passes = [op for op in concrete.graph.get_operations() if op.type == "PartitionedCall"
              and "_packed" in op.get_attr("f").name]
    assert len(passes) == groups  # one pass per group: [[0, 1], [2, 3]], or one per tensor
    got = concrete(*[tf.constant(v) for v in values]).numpy()
    for i, value in enumerate(values):
        np.testing.assert_allclose(got[i], _reference_buckets(value, 10), rtol=1e-5, atol=1e-5)


def test_groups_hold_at_most_a_chunk_and_a_large_or_unknown_tensor_alone():
    sizes = [300, 200, 13, 600, 0, 512, None, 1, 1]
    plan = buckets.groups_of(sizes, chunk=512)
    assert [i for group in plan for i in group] == list(range(len(sizes)))  # every tensor once, in order
    for group in plan:
        known = [sizes[i] for i in group]
        assert len(group) == 1 or (None not in known and sum(known) <= 512)
    assert [3] in plan and [6] in plan  # 600 > 512, and the unknown one


@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_tensors_of_one_size_are_bucketed_as_rows_with_the_concatenated_edges_and_counts(mode):
    # a deep model's layers of one width: rows of one matrix, the same buckets as flattened and concatenated
    rng = np.random.default_rng(3)
    values = [rng.normal(size=s).astype("float32") for s in [(4, 6), (24,), (2, 12), (5,), (3, 8), (5,)]]
    values[1][3] = np.nan
    values[2][1, 1] = -np.inf
    values[4][:] = 2.5  # one value: width 1
    run = lambda *ts: (buckets._buckets_packed(list(ts), 7),  # noqa: E731
                       tf.stack([buckets._concatenated([t], 7)[0] for t in ts]))
    if mode != "eager":
        run = tf.function(run, jit_compile=mode == "xla")
    as_rows, concatenated = run(*[tf.constant(v) for v in values])
    if mode != "xla":  # the graph calls the rows' kernel (XLA compiles it with the step)
        kernels = [n for n in tf.function(run).get_concrete_function(
            *[tf.TensorSpec(v.shape) for v in values]).graph._functions if "_rows_bucketed" in n]
        assert kernels, "tensors of one size were not bucketed as rows"
    np.testing.assert_array_equal(as_rows.numpy()[: len(values)], concatenated.numpy())
    for i, value in enumerate(values):
        np.testing.assert_allclose(as_rows[i].numpy(), _reference_buckets(value, 7), rtol=1e-5, atol=1e-5)
