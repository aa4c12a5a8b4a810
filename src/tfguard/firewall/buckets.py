"""Histogram buckets in TensorBoard's `[k, 3]` layout, in bounded working memory, XLA-safe.

Each tensor gets `count` buckets of equal width from the min to the max of
its finite values; non-finite values are counted at 0, so one NaN does not
erase the picture. `buckets_many` buckets many tensors at once (small ones
packed and bucketed in one pass, a large one `HISTOGRAM_CHUNK` values at a
time, `buckets_chunked`), with the same edges and counts either way.

Example:

>>> import tensorflow as tf
>>> buckets_many([tf.constant([0.0, 1.0, 1.0])], 2).shape
TensorShape([1, 2, 3])
"""

from __future__ import annotations

import itertools

import tensorflow as tf

from tfguard.firewall.stats import Reducer, as_float32, finite_or_zero, gather_rows, sizes_of

HISTOGRAM_CHUNK = 2**19
"""Values bucketed at once: histograms need O(this) working memory, whatever the model's size."""

UNROLLED_PIECES = 16
"""A large tensor of at most this many chunks is bucketed in static pieces; a larger one in a `while` loop.

Each loop is two more functions in the step's library and a loop frame run
at every histogram step; static pieces are plain ops, ~20 a chunk
(ResNet50's gradient histograms: 4.7 k ops in 64 functions -> 3.9 k in 4,
the same trace memory: it goes by ops, ~11 KB each). Past 16 chunks (8 M
values, 32 MB) the tensor dwarfs its loop, and the pieces would not.
"""


def buckets_many(tensors: list[tf.Tensor], count: int = 30, chunk: int = HISTOGRAM_CHUNK,
                 unrolled: int = UNROLLED_PIECES, bounds: list | None = None) -> tf.Tensor:
    """`[n, count, 3]`: the buckets of each tensor (left edge, right edge, count), in bounded working memory.

    Tensors of at most `chunk` values are packed into groups of at most
    `chunk` values, each group flattened, concatenated and bucketed in one
    pass (each tensor gets its own min-max edges and counts by one segment
    sum: a step with a hundred histograms traces a dozen ops, not a hundred
    per-tensor histograms). A larger tensor is bucketed on its own, `chunk`
    values at a time (`buckets_chunked`: in static pieces up to `unrolled`
    chunks, in a loop past them). The groups run one
    after another, so the working memory is a few times `chunk` values,
    never a copy of the model. Holds under XLA (no `histogram_fixed_width`,
    static shapes when sizes are known).

    A tensor whose size is not known at trace time (a layer's output in a
    step traced for any batch size) is packed by its bound in `bounds` (the
    most values it can hold), or bucketed alone when it has none: packed as
    if it held nothing, a hundred such tensors made one group of every
    value (ResNet50's activation samples: 11 M values, ~250 MB of working
    memory in one step).

    Example:

    >>> many = buckets_many([tf.constant([0.0, 1.0, 1.0]), tf.constant([5.0])], 2)
    >>> many.shape, many[0, :, 2].numpy().tolist(), many[1, :, 2].numpy().tolist()
    (TensorShape([2, 2, 3]), [1.0, 2.0], [1.0, 0.0])
    """
    sizes = [t.shape.num_elements() for t in tensors]
    if bounds is not None:
        sizes = [size if size is not None else bound for size, bound in zip(sizes, bounds)]
    rows, previous = {}, None
    for group in groups_of(sizes, chunk):
        with tf.control_dependencies([previous] if previous is not None else []):
            if len(group) == 1 and _large(tensors[group[0]], chunk):
                part = buckets_chunked(tensors[group[0]], count, chunk, unrolled)[None]
            else:
                part = _buckets_packed([tensors[i] for i in group], count)
        rows.update({i: (part, row) for row, i in enumerate(group)})
        previous = part
    return gather_rows([rows[i] for i in range(len(tensors))])


def groups_of(sizes: list, chunk: int = HISTOGRAM_CHUNK) -> list[list[int]]:
    """How `buckets_many` groups tensors of these sizes (`None`: unknown): indices, in order, per group.

    Consecutive tensors share a group while their sizes add up to at most
    `chunk`; a larger tensor, or one of unknown size, is a group alone.

    Example:

    >>> groups_of([3, 2, 9, 1, None, 0], chunk=5)
    [[0, 1], [2], [3], [4], [5]]
    """
    plan: list[list[int]] = []
    size = 0
    for i, n in enumerate(sizes):
        if n is None or n > chunk:
            plan.append([i])
            size = chunk + 1  # nothing joins a large (or unbounded) tensor's group
            continue
        if not plan or size + n > chunk:
            plan.append([])
            size = 0
        plan[-1].append(i)
        size += n
    return plan


def _large(t: tf.Tensor, chunk: int) -> bool:
    n = t.shape.num_elements()
    return n is not None and n > chunk


def _buckets_packed(tensors: list[tf.Tensor], count: int) -> tf.Tensor:
    """`[n, count, 3]` of small tensors: flattened, concatenated, one segment sum."""
    n = len(tensors)
    reducer = Reducer()
    flat = [reducer.flat(as_float32(t)) for t in tensors]
    x = finite_or_zero(tf.concat(flat, axis=0) if n > 1 else flat[0])
    segment = segment_ids(flat)
    sizes = sizes_of(flat)
    empty = tf.equal(sizes, 0)
    low = tf.where(empty, 0.0, tf.math.unsorted_segment_min(x, segment, n))
    high = tf.where(empty, 0.0, tf.math.unsorted_segment_max(x, segment, n))
    width = tf.where(high > low, (high - low) / count, 1.0)
    index = tf.cast(tf.floor((x - tf.gather(low, segment)) / tf.gather(width, segment)), tf.int32)
    index = tf.clip_by_value(index, 0, count - 1) + segment * count
    # ones that the graph optimizer cannot fold into a constant of x's size (index >= 0 always holds)
    ones = tf.cast(index >= 0, tf.float32)
    counts = tf.reshape(tf.math.unsorted_segment_sum(ones, index, n * count), [n, count])
    return _layout(low, width, counts, count)


def _layout(low: tf.Tensor, width: tf.Tensor, counts: tf.Tensor, count: int) -> tf.Tensor:
    """TensorBoard's `[n, count, 3]` (left edge, right edge, count) from edges and counts."""
    low, width = tf.expand_dims(low, 1), tf.expand_dims(width, 1)
    left = low + width * tf.constant([list(map(float, range(count)))])
    return tf.stack([left, left + width, counts], axis=2)


def buckets_chunked(values: tf.Tensor, count: int = 30, chunk: int = HISTOGRAM_CHUNK,
                    unrolled: int = UNROLLED_PIECES) -> tf.Tensor:
    """`[count, 3]` buckets of one large tensor, `chunk` values at a time (the same buckets as `buckets_many`).

    Two passes over the flattened tensor: the min and max of its finite
    view (non-finite values count as 0), then the counts.
    Up to `unrolled` chunks, the pieces are static slices of one `split`
    (views of the tensor, no copy), each pass one piece after another;
    past that, two `while` loops read a static `chunk`-sized slice at a
    time, the last slice moved back to end at the tensor's end and the
    values it shares with the slice before not counted twice. Working
    memory: a few times `chunk` values.

    Example:

    >>> b = buckets_chunked(tf.range(10, dtype=tf.float32), 2, chunk=4)
    >>> b[:, 2].numpy().tolist(), b[0, 0].numpy().item(), b[1, 1].numpy().item()
    ([5.0, 5.0], 0.0, 9.0)
    >>> bool(tf.reduce_all(buckets_chunked(tf.range(10.0), 2, chunk=4, unrolled=0) == b))
    True
    """
    flat = tf.reshape(values, [-1])
    n = flat.shape.num_elements()
    if n is None or n <= chunk:
        return _buckets_packed([values], count)[0]
    low, high, counts_in = (_pieces if -(-n // chunk) <= unrolled else _looped)(flat, n, chunk)
    width = tf.where(high > low, (high - low) / count, 1.0)

    def counts_of(x):
        index = tf.clip_by_value(tf.cast(tf.floor((x - low) / width), tf.int32), 0, count - 1)
        return tf.math.unsorted_segment_sum(tf.cast(index >= 0, tf.float32), index, count)  # ones, not foldable

    counts = counts_in(lambda x: counts_of(finite_or_zero(x)), tf.zeros([count]))
    return _layout(low[None], width[None], counts[None], count)[0]


def _pieces(flat: tf.Tensor, n: int, chunk: int):
    """`buckets_chunked`'s passes over static pieces: (low, high, counts_in(count_fn, zeros))."""
    pieces = tf.split(flat, [chunk] * (n // chunk) + ([n % chunk] if n % chunk else []))
    axis = tf.constant([0])
    low, high = tf.constant(float("inf")), tf.constant(float("-inf"))
    for piece in pieces:
        with tf.control_dependencies([low]):  # one piece's working memory at a time
            x = finite_or_zero(piece)
        low, high = tf.minimum(low, tf.reduce_min(x, axis)), tf.maximum(high, tf.reduce_max(x, axis))

    def counts_in(count_fn, counts):
        for piece in pieces:
            with tf.control_dependencies([counts]):
                counts = counts + count_fn(piece)
        return counts

    return low, high, counts_in


def _looped(flat: tf.Tensor, n: int, chunk: int):
    """`buckets_chunked`'s passes as two `while` loops: (low, high, counts_in(count_fn, zeros))."""
    steps = -(-n // chunk)

    def extremes(i, low, high):
        start = tf.minimum(i * chunk, n - chunk)
        x = finite_or_zero(tf.slice(flat, tf.reshape(start, [1]), [chunk]))
        return i + 1, tf.minimum(low, tf.reduce_min(x)), tf.maximum(high, tf.reduce_max(x))

    _, low, high = tf.while_loop(lambda i, *_: i < steps, extremes,
                                 (tf.constant(0), tf.constant(float("inf")), tf.constant(float("-inf"))))

    def counts_in(count_fn, counts):
        # the whole slices in the loop, the rest (static, at most `chunk` values) after it: no per-value
        # constant (a range, a mask) that the graph optimizer would fold into the graph per tensor
        whole = n // chunk
        _, counts = tf.while_loop(
            lambda i, _: i < whole,
            lambda i, c: (i + 1, c + count_fn(tf.slice(flat, tf.reshape(i * chunk, [1]), [chunk]))),
            (tf.constant(0), counts))
        return counts + count_fn(flat[whole * chunk:]) if n > whole * chunk else counts

    return low, high, counts_in


def segment_ids(tensors: list[tf.Tensor]) -> tf.Tensor:
    """For the concatenation of the vectors `tensors`, which vector each value came from (int32).

    A mark where each vector starts, and a running sum: a few ops whatever
    the number of vectors, static shapes when their sizes are known (XLA).
    With known sizes the ids are a function of constants alone, which
    TensorFlow's constant folding (at function instantiation, outside
    Grappler) would turn into a constant the size of the vectors, kept by
    the graph for the life of the step function: ~11 MB for each group of
    2**19 values. The marks are made from a zero read at run time
    (`_runtime_zero`), so nothing the size of the data is folded.

    Example:

    >>> segment_ids([tf.ones([2]), tf.ones([0]), tf.ones([3])]).numpy().tolist()
    [0, 0, 2, 2, 2]
    """
    static = [t.shape.num_elements() for t in tensors]
    if all(size is not None for size in static):
        total = sum(static)
        if total == 0:
            return tf.zeros([0], tf.int32)
        zero = _runtime_zero(next(t for t, size in zip(tensors, static) if size))
        starts = [start for start in itertools.accumulate(static[:-1]) if start < total]
        if not starts:
            return tf.fill([total], zero)
        marks = tf.scatter_nd(tf.constant([[start] for start in starts], tf.int32),
                              tf.fill([len(starts)], zero + 1), tf.constant([total], tf.int32))
        return tf.cumsum(marks)
    ends = tf.cumsum(sizes_of(tensors))
    total = ends[-1]
    marks = tf.math.unsorted_segment_sum(tf.ones_like(ends[:-1]), ends[:-1], total + 1)[:total]
    return tf.cumsum(marks)


def _runtime_zero(t: tf.Tensor) -> tf.Tensor:
    """An int32 0 that no graph optimizer can know before the step runs: `|t[0]| < 0` never holds, NaN included."""
    return tf.cast(tf.reduce_any(tf.abs(tf.reshape(t, [-1])[:1]) < 0), tf.int32)


__all__ = ["HISTOGRAM_CHUNK", "UNROLLED_PIECES", "buckets_chunked", "buckets_many", "groups_of", "segment_ids"]
