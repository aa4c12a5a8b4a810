"""Histogram buckets in TensorBoard's `[k, 3]` layout, in bounded working memory, XLA-safe.

Each tensor gets `count` buckets of equal width from the min to the max of
its finite values; non-finite values are counted at 0, so one NaN does not
erase the picture. `buckets_many` buckets many tensors at once (small ones
packed and bucketed in one pass, a large one `HISTOGRAM_CHUNK` values at a
time, `buckets_chunked`), with the same edges and counts either way.
In a graph each group and each piece is one call of a function traced
once per shape (`_kernel`): a step that buckets hundreds of tensors traces
a few ops per group, not the bucketing itself each time.

Example:

>>> import tensorflow as tf
>>> buckets_many([tf.constant([0.0, 1.0, 1.0])], 2).shape
TensorShape([1, 2, 3])
"""

from __future__ import annotations

import functools

import tensorflow as tf

from tfguard._hooks import tf_compat
from tfguard._signals.stats import Reducer, as_float32, finite_or_zero, gather_rows, sizes_of

HISTOGRAM_CHUNK = 2**19
"""Values bucketed at once: histograms need O(this) working memory, whatever the model's size."""

UNROLLED_PIECES = 16
"""A large tensor of at most this many chunks is bucketed in static pieces; a larger one in a `while` loop.

Each loop is two more functions in the step's library and a loop frame run
at every histogram step; static pieces are two calls a chunk. Past 16
chunks (8 M values, 32 MB) the tensor dwarfs its loop, and the pieces
would not.
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
    rows, previous, reducer = {}, None, Reducer()  # one flat shape for every group
    for group in groups_of(sizes, chunk):
        with tf.control_dependencies([previous] if previous is not None else []):
            if len(group) == 1:  # a large tensor chunk by chunk; a small one or one of unknown size packed
                part = _chunked_table(tensors[group[0]], count, chunk, unrolled, reducer)
            else:
                part = _buckets_packed([tensors[i] for i in group], count, reducer)
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


def _kernel(fn):
    """`fn` as one `tf.function` for every call in a graph, kept a call (never inlined) when it runs.

    Histograms repeat one computation on many groups and pieces. Inlined,
    each repetition is ops of the step's trace, which the CPU keeps for the
    life of the step function (ResNet50's gradient histograms were 4.1 k
    ops, 40 % of them constants); a call is one op, and its body is traced
    and instantiated once per shape (200 calls of a 77-op body: 118 MB
    inlined, 41 MB as calls that TensorFlow inlines when it instantiates
    the step, 10 MB as calls it does not). Eagerly, `fn` runs as it is.
    Under XLA the calls are compiled with the step, as any function call.
    """
    traced = tf_compat.never_inlined(fn)

    @functools.wraps(fn)
    def call(*args):
        return fn(*args) if tf.executing_eagerly() else traced(*args)

    return call


def _buckets_packed(tensors: list[tf.Tensor], count: int, reducer: Reducer | None = None) -> tf.Tensor:
    """`[rows, count, 3]` of `n` small tensors, the first `n` rows theirs.

    Tensors of one known size (a deep model's layers of one width, their
    kernels, their biases) are bucketed as the rows of one matrix
    (`_rows_bucketed`): per-row reductions and broadcasts, no segment id
    or gathered edge per value (200 activations of 2,048 values: ~4 ms
    where `_packed` took ~12 on one CPU thread). The others are
    flattened, concatenated and bucketed by one call of `_packed`
    (`_concatenated`). The same edges and counts either way.
    """
    sizes: dict[int, list[int]] = {}
    for i, t in enumerate(tensors):
        size = t.shape.num_elements()
        if size:
            sizes.setdefault(size, []).append(i)
    alike = [group for group in sizes.values() if len(group) > 1]
    if not alike:
        return _concatenated(tensors, count, reducer)
    reducer = reducer or Reducer()
    rows = {}
    for group in alike:
        table = _rows_bucketed(tf.stack([reducer.flat(as_float32(tensors[i])) for i in group]), len(group), count)
        rows.update({i: (table, row) for row, i in enumerate(group)})
    rest = [i for i in range(len(tensors)) if i not in rows]
    if rest:
        table = _concatenated([tensors[i] for i in rest], count, reducer)
        rows.update({i: (table, row) for row, i in enumerate(rest)})
    return gather_rows([rows[i] for i in range(len(tensors))])


def _concatenated(tensors: list[tf.Tensor], count: int, reducer: Reducer | None = None) -> tf.Tensor:
    """`[rows, count, 3]` of `n` small tensors, the first `n` rows theirs: flattened, concatenated, one call of `_packed`.

    The sizes are padded to `rows`, a power of two, with empty vectors (rows
    of zeros after the `n` tensors'), so a step's groups share a few traces
    of `_packed`.
    """
    n = len(tensors)
    reducer = reducer or Reducer()
    flat = [reducer.flat(as_float32(t)) for t in tensors]
    rows = 1 << (n - 1).bit_length()
    sizes = sizes_of(flat)
    if rows > n:
        sizes = tf.concat([sizes, tf.zeros([rows - n], tf.int32)], axis=0)
    return _packed(tf.concat(flat, axis=0) if n > 1 else flat[0], sizes, rows, count)


@_kernel
def _rows_bucketed(x: tf.Tensor, n: int, count: int) -> tf.Tensor:
    """`[n, count, 3]`: the buckets of each row of `x` (`[n, size]`, `size` > 0), as `_packed` buckets them."""
    x = finite_or_zero(x)
    low, high = tf.reduce_min(x, axis=1), tf.reduce_max(x, axis=1)
    width = tf.where(high > low, (high - low) / count, 1.0)
    index = tf.cast(tf.floor((x - low[:, None]) / width[:, None]), tf.int32)
    index = tf.clip_by_value(index, 0, count - 1) + tf.range(n)[:, None] * count
    # ones that the graph optimizer cannot fold into a constant of x's size (index >= 0 always holds)
    ones = tf.cast(index >= 0, tf.float32)
    counts = tf.reshape(tf.math.unsorted_segment_sum(ones, index, n * count), [n, count])
    return _layout(low, width, counts, count)


@_kernel
def _packed(x: tf.Tensor, sizes: tf.Tensor, n: int, count: int) -> tf.Tensor:
    """`[n, count, 3]`: the buckets of each vector of the concatenation `x` (of `n` vectors of `sizes` values)."""
    segment = segment_ids(sizes + _runtime_zero(x), tf.size(x))
    x = finite_or_zero(x)
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
    view (non-finite values count as 0), then the counts, each piece one
    call of `_extremes` and `_counted` that takes what the piece before it
    left (so the pieces run one after another).
    Up to `unrolled` chunks, the pieces are static slices of one `split`
    (views of the tensor, no copy); past that, two `while` loops read a
    static `chunk`-sized slice at a time and the rest after the loop.
    Working memory: a few times `chunk` values.

    Example:

    >>> b = buckets_chunked(tf.range(10, dtype=tf.float32), 2, chunk=4)
    >>> b[:, 2].numpy().tolist(), b[0, 0].numpy().item(), b[1, 1].numpy().item()
    ([5.0, 5.0], 0.0, 9.0)
    >>> bool(tf.reduce_all(buckets_chunked(tf.range(10.0), 2, chunk=4, unrolled=0) == b))
    True
    """
    return _chunked_table(values, count, chunk, unrolled)[0]


def _chunked_table(values: tf.Tensor, count: int, chunk: int, unrolled: int,
                   reducer: Reducer | None = None) -> tf.Tensor:
    """`buckets_chunked` as a table of one row, `[1, count, 3]` (packed when it holds at most `chunk` values)."""
    n = values.shape.num_elements()
    if n is None or n <= chunk:
        return _concatenated([values], count, reducer)
    flat = tf.reshape(values, [-1])
    passes = _pieces if -(-n // chunk) <= unrolled else _looped
    extremes = passes(flat, n, chunk, _extremes, tf.constant([float("inf"), float("-inf")]))
    counts = passes(flat, n, chunk, lambda piece, counts: _counted(piece, counts, extremes, count),
                    tf.zeros([count]))
    return _chunked_layout(extremes, counts, count)


def _edges(extremes: tf.Tensor, count: int) -> tuple[tf.Tensor, tf.Tensor]:
    """`(low, width)` of `count` buckets spanning `[min, max]` (width 1 when they are equal)."""
    low, high = extremes[0], extremes[1]
    return low, tf.where(high > low, (high - low) / count, 1.0)


@_kernel
def _extremes(piece: tf.Tensor, extremes: tf.Tensor) -> tf.Tensor:
    """`[min, max]` of `extremes` and the finite view of `piece`."""
    x = finite_or_zero(piece)
    return tf.stack([tf.minimum(extremes[0], tf.reduce_min(x)), tf.maximum(extremes[1], tf.reduce_max(x))])


@_kernel
def _counted(piece: tf.Tensor, counts: tf.Tensor, extremes: tf.Tensor, count: int) -> tf.Tensor:
    """`counts` plus the bucket counts of the finite view of `piece`, for `count` buckets spanning `extremes`."""
    low, width = _edges(extremes, count)
    index = tf.clip_by_value(tf.cast(tf.floor((finite_or_zero(piece) - low) / width), tf.int32), 0, count - 1)
    return counts + tf.math.unsorted_segment_sum(tf.cast(index >= 0, tf.float32), index, count)  # ones, not foldable


@_kernel
def _chunked_layout(extremes: tf.Tensor, counts: tf.Tensor, count: int) -> tf.Tensor:
    """`[1, count, 3]`: the layout of one tensor's buckets from its `[min, max]` and counts."""
    low, width = _edges(extremes, count)
    return _layout(low[None], width[None], counts[None], count)


def _pieces(flat: tf.Tensor, n: int, chunk: int, step, state: tf.Tensor) -> tf.Tensor:
    """`state` carried through `step(piece, state)` over static pieces of `flat` (views of one `split`)."""
    for piece in tf.split(flat, [chunk] * (n // chunk) + ([n % chunk] if n % chunk else [])):
        state = step(piece, state)
    return state


def _looped(flat: tf.Tensor, n: int, chunk: int, step, state: tf.Tensor) -> tf.Tensor:
    """`state` carried through `step(piece, state)` over `flat`, `chunk` values a turn of a `while` loop.

    The whole slices in the loop, the rest (static, at most `chunk` values)
    after it: no per-value constant (a range, a mask) that the graph
    optimizer would fold into the graph per tensor.
    """
    whole = n // chunk
    _, state = tf.while_loop(
        lambda i, _: i < whole,
        lambda i, s: (i + 1, step(tf.slice(flat, tf.reshape(i * chunk, [1]), [chunk]), s)),
        (tf.constant(0), state))
    return step(flat[whole * chunk:], state) if n > whole * chunk else state


def segment_ids(sizes: tf.Tensor, total) -> tf.Tensor:
    """For a concatenation of vectors of `sizes` values (`total` in all), which vector each value came from (int32).

    A mark where each vector ends, and a running sum: a few ops whatever
    the number of vectors. Ids computed from constant sizes alone would be
    turned by TensorFlow's constant folding (at function instantiation,
    outside Grappler) into a constant the size of the vectors, kept by the
    graph for the life of the step function (~11 MB for each group of
    2**19 values): `_packed` adds a zero read at run time to its sizes
    (`_runtime_zero`).

    Example:

    >>> segment_ids(tf.constant([2, 0, 3]), 5).numpy().tolist()
    [0, 0, 2, 2, 2]
    """
    ends = tf.cumsum(sizes)
    marks = tf.math.unsorted_segment_sum(tf.ones_like(ends[:-1]), ends[:-1], total + 1)[:total]
    return tf.cumsum(marks)


def _runtime_zero(t: tf.Tensor) -> tf.Tensor:
    """An int32 0 that no graph optimizer can know before the step runs: no value is both NaN and finite.

    Not `|t[0]| < 0`: XLA's simplifier knows that never holds, and then
    folds the segment ids into constants the size of the data (seconds of
    compilation for each packed group).

    Example:

    >>> int(_runtime_zero(tf.constant([float("nan"), 1.0])))
    0
    """
    first = tf.reshape(t, [-1])[:1]
    return tf.cast(tf.reduce_any(tf.math.is_nan(first) & tf.math.is_finite(first)), tf.int32)


__all__ = ["HISTOGRAM_CHUNK", "UNROLLED_PIECES", "buckets_chunked", "buckets_many", "groups_of", "segment_ids"]
