"""In-graph statistics the train step computes once and hands to the host.

All functions are XLA-safe (fixed output shapes, no host ops): histogram
buckets in TensorBoard's `[k, 3]` layout, dead-unit and saturation fractions.

Example:

>>> import tensorflow as tf
>>> float(dead_fraction(tf.constant([[0.0, 1.0], [0.0, 2.0]])))
0.5
>>> buckets(tf.constant([0.0, 1.0, 1.0]), 2).shape
TensorShape([2, 3])
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

# Outputs beyond these mean a pre-activation outside +-5 (DeepDiagnosis, ICSE 2022).
SATURATION_PREACTIVATION = 5.0
RELU_FAMILY = ("relu", "relu6")
SATURATING = ("sigmoid", "tanh")
# Activation histograms look at the batch's first examples, up to this many values:
# 2**16 values put ~2,000 in each of 30 buckets, and a histogram of a large
# feature map costs 20x less than over the whole batch.
ACTIVATION_SAMPLE = 2**16


def activation_kind(layer: keras.layers.Layer) -> str | None:
    """`"relu"`, `"sigmoid"`, `"tanh"` or `None`: the nonlinearity a layer ends with."""
    if isinstance(layer, keras.layers.ReLU):
        return "relu"
    activation = getattr(layer, "activation", None)
    if activation is None:
        return None
    name = getattr(activation, "__name__", "") or ""
    if name in RELU_FAMILY:
        return "relu"
    if name in SATURATING:
        return name
    return None


def _finite(x: tf.Tensor) -> tf.Tensor:
    x = tf.cast(x, tf.float32)
    return tf.where(tf.math.is_finite(x), x, tf.zeros_like(x))


def dead_fraction(outputs: tf.Tensor) -> tf.Tensor:
    """Fraction of units (last axis) that are <= 0 for every example and position."""
    x = tf.cast(outputs, tf.float32)
    units = tf.reshape(x, [-1, tf.shape(x)[-1]])
    alive = tf.reduce_max(units, axis=0) > 0
    return 1.0 - tf.reduce_mean(tf.cast(alive, tf.float32))


def saturated_fraction(outputs: tf.Tensor, kind: str) -> tf.Tensor:
    """Fraction of outputs whose pre-activation lies outside +-5 (from the output value)."""
    x = tf.cast(outputs, tf.float32)
    if kind == "sigmoid":
        low = tf.sigmoid(-SATURATION_PREACTIVATION)
        high = tf.sigmoid(SATURATION_PREACTIVATION)
        saturated = (x <= low) | (x >= high)
    else:
        saturated = tf.abs(x) >= tf.tanh(SATURATION_PREACTIVATION)
    return tf.reduce_mean(tf.cast(saturated, tf.float32))


def as_float32(t: tf.Tensor) -> tf.Tensor:
    """`t` in float32 (no op when it already is)."""
    return t if t.dtype == tf.float32 else tf.cast(t, tf.float32)


class Reducer:
    """Whole-tensor reductions that share their constants, so a graph of many stays small.

    One axes constant per rank, one flat shape, one zero: a step with a
    hundred variables traces one op per variable and statistic, not three.

    Example:

    >>> r = Reducer()
    >>> float(r.sum(tf.ones([2, 3]))), r.flat(tf.ones([2, 3])).shape
    (6.0, TensorShape([6]))
    """

    def __init__(self):
        self._axes: dict[int, tf.Tensor] = {}
        self._flat_shape = None
        self._zero = None

    def sum(self, t: tf.Tensor) -> tf.Tensor:
        """The sum of every value of `t` (a scalar in `t`'s dtype)."""
        rank = t.shape.rank
        if rank == 0:
            return t
        if rank is None:
            return tf.reduce_sum(t)
        axes = self._axes.get(rank)
        if axes is None:
            axes = self._axes[rank] = tf.constant(list(range(rank)), tf.int32)
        return tf.reduce_sum(t, axis=axes)

    def zeros(self, t: tf.Tensor) -> tf.Tensor:
        """How many values of `t` are exactly zero (float32)."""
        t = as_float32(t)
        if self._zero is None:
            self._zero = tf.constant(0.0)
        return self.sum(tf.cast(tf.equal(t, self._zero), tf.float32))

    def flat(self, t: tf.Tensor) -> tf.Tensor:
        """`t` as a vector."""
        if self._flat_shape is None:
            self._flat_shape = tf.constant([-1], tf.int32)
        return tf.reshape(t, self._flat_shape)


def sizes_of(tensors: list[tf.Tensor]) -> tf.Tensor:
    """The number of values of each tensor (int32 `[n]`): a constant when every shape is known."""
    static = [t.shape.num_elements() for t in tensors]
    if all(size is not None for size in static):
        return tf.constant(static, tf.int32)
    return tf.stack([tf.constant(size, tf.int32) if size is not None else tf.size(t, tf.int32)
                     for size, t in zip(static, tensors)])


def squared_norms(tensors: list[tf.Tensor]) -> tf.Tensor:
    """`[n]`: the sum of squares of each tensor, in float32 (one `L2Loss` op each)."""
    return 2.0 * tf.stack([tf.nn.l2_loss(as_float32(t)) for t in tensors])


def buckets(values: tf.Tensor, count: int = 30, *, xla: bool = False) -> tf.Tensor:
    """TensorBoard histogram buckets `[count, 3]` = left edge, right edge, count.

    Edges run from the min to the max of the finite values; non-finite
    values are counted at 0 so one NaN does not erase the picture. Counting
    uses `tf.histogram_fixed_width` (about 4x faster on CPU), or a segment
    sum when the graph is XLA-compiled (`xla=True`), where the former has no
    kernel.
    """
    x = tf.reshape(_finite(values), [-1])
    empty = tf.equal(tf.size(x), 0)
    low = tf.where(empty, 0.0, tf.reduce_min(x))
    high = tf.where(empty, 0.0, tf.reduce_max(x))
    width = tf.where(high > low, (high - low) / count, 1.0)
    if xla:
        index = tf.clip_by_value(tf.cast(tf.floor((x - low) / width), tf.int32), 0, count - 1)
        counts = tf.math.unsorted_segment_sum(tf.ones_like(x), index, count)
    else:
        edges = tf.stack([low, low + width * count])
        counts = tf.cast(tf.histogram_fixed_width(x, edges, nbins=count), tf.float32)
    left = low + width * tf.range(count, dtype=tf.float32)
    return tf.stack([left, left + width, counts], axis=1)


def buckets_many(tensors: list[tf.Tensor], count: int = 30) -> tf.Tensor:
    """`[n, count, 3]`: the `buckets` of each tensor, in one pass over all of them.

    The tensors are flattened and concatenated; each gets its own min-max
    edges and counts by one segment sum, so a step with a hundred
    histograms traces one or two ops per tensor and a dozen in all, instead
    of a hundred calls of `buckets` (and holds under XLA: no
    `histogram_fixed_width`).

    Example:

    >>> many = buckets_many([tf.constant([0.0, 1.0, 1.0]), tf.constant([5.0])], 2)
    >>> many.shape, many[0, :, 2].numpy().tolist(), many[1, :, 2].numpy().tolist()
    (TensorShape([2, 2, 3]), [1.0, 2.0], [1.0, 0.0])
    """
    n = len(tensors)
    reducer = Reducer()
    flat = [reducer.flat(as_float32(t)) for t in tensors]
    sizes = sizes_of(flat)
    x = _finite(tf.concat(flat, axis=0))
    segment = tf.repeat(tf.range(n), sizes)
    empty = tf.equal(sizes, 0)
    low = tf.where(empty, 0.0, tf.math.unsorted_segment_min(x, segment, n))
    high = tf.where(empty, 0.0, tf.math.unsorted_segment_max(x, segment, n))
    width = tf.where(high > low, (high - low) / count, 1.0)
    index = tf.cast(tf.floor((x - tf.gather(low, segment)) / tf.gather(width, segment)), tf.int32)
    index = tf.clip_by_value(index, 0, count - 1) + segment * count
    counts = tf.reshape(tf.math.unsorted_segment_sum(tf.ones_like(x), index, n * count), [n, count])
    left = low[:, None] + width[:, None] * tf.range(count, dtype=tf.float32)[None, :]
    return tf.stack([left, left + width[:, None], counts], axis=2)


def leading_examples(values: tf.Tensor, limit: int = ACTIVATION_SAMPLE) -> tf.Tensor:
    """The first examples of a batch (axis 0), as many as hold at most `limit` values.

    A contiguous slice: every channel and position is represented (a strided
    sample could fall on one channel only). Where one example alone holds
    more than `limit` values (an upsampled image, a long sequence), the first
    example is flattened and sampled with a stride coprime to its last axis,
    so every channel still shows and the sample never grows with the layer.
    The count is static when the per-example shape is known, so it holds
    under XLA; with an unknown per-example shape the whole tensor is returned.

    Example:

    >>> leading_examples(tf.zeros([64, 26, 26, 32])).shape
    TensorShape([3, 26, 26, 32])
    >>> leading_examples(tf.zeros([8, 4])).shape
    TensorShape([8, 4])
    >>> leading_examples(tf.zeros([2, 512, 512, 3]), limit=1000).shape
    TensorShape([1000])
    """
    shape = values.shape
    if shape.rank is None or shape.rank < 2 or not shape[1:].is_fully_defined():
        return values
    per_example = max(1, shape[1:].num_elements())
    if per_example <= limit:
        return values[: max(1, limit // per_example)]
    stride = -(-per_example // limit)
    if math.gcd(stride, shape[-1]) != 1:
        stride = next(s for s in range(stride + 1, stride + shape[-1] + 2) if math.gcd(s, shape[-1]) == 1)
    return tf.reshape(values[:1], [-1])[::stride][:limit]


def moments(values: tf.Tensor) -> dict[str, tf.Tensor]:
    """min, max, mean and std of the finite view of a tensor."""
    x = tf.reshape(_finite(values), [-1])
    empty = tf.equal(tf.size(x), 0)
    mean, variance = tf.nn.moments(x, axes=[0])
    zero = tf.constant(0.0)
    return {
        "min": tf.where(empty, zero, tf.reduce_min(x)),
        "max": tf.where(empty, zero, tf.reduce_max(x)),
        "mean": tf.where(empty, zero, mean),
        "std": tf.where(empty, zero, tf.sqrt(variance)),
    }
