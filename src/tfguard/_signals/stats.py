"""In-graph statistics the train step computes once and hands to the host.

All functions are XLA-safe (fixed output shapes, no host ops): whole-tensor
reductions shared across a step (`Reducer`), dead-unit and saturation
fractions, squared norms, per-variable tables read back by row. Histogram
buckets live in `tfguard._signals.buckets`.

Example:

>>> import tensorflow as tf
>>> dead_fractions([tf.constant([[0.0, 1.0], [0.0, 2.0]])]).numpy().tolist()
[0.5]
"""

from __future__ import annotations

import math
from collections.abc import Callable

import keras
import tensorflow as tf

from tfguard._hooks.stacks import stack_groups

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


def finite_or_zero(x: tf.Tensor) -> tf.Tensor:
    """`x` in float32, each NaN or Inf replaced by 0: the finite view histograms and moments read.

    >>> finite_or_zero(tf.constant([1.0, float("nan")])).numpy().tolist()
    [1.0, 0.0]
    """
    x = tf.cast(x, tf.float32)
    return tf.where(tf.math.is_finite(x), x, 0.0)  # a scalar: a zeros_like of a known shape is folded into a constant


def dead_fractions(outputs: list[tf.Tensor]) -> tf.Tensor:
    """`[n]`: for each output, the fraction of units (last axis) that are <= 0 for every example and position.

    One max per output (its peak per unit); the peaks of outputs of one
    width are then counted together, one comparison and one count per
    width, and one division for all of them.

    Example:

    >>> dead = dead_fractions([tf.constant([[0.0, 1.0], [0.0, 2.0]]), tf.constant([[[-1.0, 0.0, 3.0]]])])
    >>> [round(v, 3) for v in dead.numpy().tolist()]
    [0.5, 0.667]
    """
    reducer = Reducer()
    peaks, units = [], []
    for output in outputs:
        x = as_float32(output)
        if x.shape.rank is None or x.shape.rank == 0:
            x = tf.reshape(x, [-1, tf.shape(x)[-1]] if x.shape.rank is None else [1, 1])
        peaks.append(reducer.max_but_last(x))
        units.append(x.shape[-1] if x.shape[-1] is not None else tf.cast(tf.shape(x)[-1], tf.float32))

    def alive_rows(group):
        return row_sums(tf.cast(tf.stack([peaks[i] for i in group]) > reducer.zero, tf.float32))

    def alive_alone(i):
        return reducer.sum(tf.cast(peaks[i] > reducer.zero, tf.float32))

    alive = grouped_rows(stack_groups([(p.shape, p.dtype) for p in peaks]), alive_rows, alive_alone)
    if all(isinstance(u, int) for u in units):  # one constant for every width
        widths = tf.constant([float(max(u, 1)) for u in units])
    else:
        widths = tf.maximum(tf.stack([tf.constant(float(u)) if isinstance(u, int) else u for u in units]), 1.0)
    return 1.0 - alive / widths


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
        self._axes: dict[tuple[int, bool], tf.Tensor] = {}
        self._flat_shape = None
        self._zero = None
        self._sums: dict[int, tuple[tf.Tensor, tf.Tensor]] = {}

    def all_finite(self, tensors: list[tf.Tensor]) -> tf.Tensor:
        """Whether every value of every tensor is finite (a scalar bool), in a few ops however many tensors.

        Small tensors of one shape are added together and summed (a finite
        sum means every value is finite; an overflowing sum only sends the
        caller to its exact count); a tensor summed before by this reducer
        is not summed again. A deep model's hundreds of gradients and
        weights cost a dozen ops, not one per tensor. Float32 tensors are
        added (`tf.add_n`: each value read once, nothing copied), others
        stacked and summed in float32 (a half-precision addition would
        overflow where their sum in float32 does not). A stack copied a
        guarded step's every gradient, weight and optimizer slot.
        """
        graph = tf.compat.v1.get_default_graph() if not tf.executing_eagerly() else None
        parts, fresh = [], []
        for t in tensors:
            known = self._sums.get(id(t))
            if known is not None and known[0] is t and graph is not None and known[1].graph is graph:
                parts.append(known[1])
            else:
                fresh.append(t)
        stackable = [(t.shape, t.dtype) if graph is not None and (t.shape.num_elements() or 0) > 0 else (None, t.dtype)
                     for t in fresh]
        for group in stack_groups(stackable):
            if len(group) == 1:  # one Sum: a stack of one and its slice would be two more ops per tensor
                parts.append(self.sum_of(fresh[group[0]]))
                continue
            members = [fresh[i] for i in group]
            together = tf.add_n(members) if members[0].dtype == tf.float32 else as_float32(tf.stack(members))
            total = self.sum(together)
            for t in members:
                self._sums[id(t)] = (t, total)
            parts.append(total)
        if not parts:
            return tf.constant(True)
        return tf.reduce_all(tf.math.is_finite(tf.stack(parts)))

    def sums(self, tensors: list[tf.Tensor]) -> tf.Tensor:
        """`[n]` float32: the sum of each tensor, each taken once per reducer (a second call reuses it).

        A finite sum means every value is finite: the cheap half of a
        finiteness check. Sums taken in another graph (a branch) are taken again.
        """
        return tf.stack([self.sum_of(t) for t in tensors])

    def sum_of(self, t: tf.Tensor) -> tf.Tensor:
        """The float32 sum of `t` (a scalar), taken once per reducer and graph: `sums` of one tensor, without a stack.

        A per-tensor judgement (a gated update's values, one variable at a
        time) costs one `Sum` here, not a `Pack`, a `Sum` and a slice.
        """
        graph = tf.compat.v1.get_default_graph() if not tf.executing_eagerly() else None
        known = self._sums.get(id(t))
        if known is None or known[0] is not t or graph is None or known[1].graph is not graph:
            known = (t, self.sum(as_float32(t)))
            if graph is not None:
                self._sums[id(t)] = known
        return known[1]

    def _axes_of(self, rank: int, last: bool) -> tf.Tensor:
        axes = self._axes.get((rank, last))
        if axes is None:
            axes = self._axes[rank, last] = tf.constant(list(range(rank if last else rank - 1)), tf.int32)
        return axes

    @property
    def zero(self) -> tf.Tensor:
        """A float32 0 shared by every comparison."""
        if self._zero is None:
            self._zero = tf.constant(0.0)
        return self._zero

    def sum(self, t: tf.Tensor) -> tf.Tensor:
        """The sum of every value of `t` (a scalar in `t`'s dtype)."""
        rank = t.shape.rank
        if rank == 0:
            return t
        if rank is None:
            return tf.reduce_sum(t)
        return tf.reduce_sum(t, axis=self._axes_of(rank, last=True))

    def max_but_last(self, t: tf.Tensor) -> tf.Tensor:
        """The max over every axis but the last (`t` itself when it has one axis)."""
        rank = t.shape.rank
        return t if rank == 1 else tf.reduce_max(t, axis=self._axes_of(rank, last=False))

    def zeros(self, t: tf.Tensor) -> tf.Tensor:
        """How many values of `t` are exactly zero (float32)."""
        return self.sum(tf.cast(tf.equal(as_float32(t), self.zero), tf.float32))

    def flat(self, t: tf.Tensor) -> tf.Tensor:
        """`t` as a vector."""
        if self._flat_shape is None:
            self._flat_shape = tf.constant([-1], tf.int32)
        return tf.reshape(t, self._flat_shape)


def gather_rows(taken: list[tuple[tf.Tensor, int]]) -> tf.Tensor:
    """`[k, ...]`: row `row` of `table` for each `(table, row)`, in order: one gather per table, not a slice per row.

    The per-variable tables a step takes at the optimizer's apply (gradient
    norms, weight norms, gradient histograms) are read back row by row; a
    slice per row costs a `StridedSlice` and three constants per variable.

    Example:

    >>> a, b = tf.constant([[1.0], [2.0]]), tf.constant([[3.0]])
    >>> gather_rows([(b, 0), (a, 1), (a, 0)]).numpy().ravel().tolist()
    [3.0, 2.0, 1.0]
    """
    by_table: dict[int, tuple] = {}
    for position, (table, row) in enumerate(taken):
        entry = by_table.setdefault(id(table), (table, [], []))
        entry[1].append(row)
        entry[2].append(position)
    parts, positions = [], []
    for table, rows, where in by_table.values():
        whole = table.shape.rank is not None and rows == list(range(table.shape[0] or 0))
        parts.append(table if whole else tf.gather(table, rows))
        positions += where
    out = tf.concat(parts, axis=0) if len(parts) > 1 else parts[0]
    if positions != list(range(len(taken))):
        inverse = [0] * len(positions)
        for index, position in enumerate(positions):
            inverse[position] = index
        out = tf.gather(out, inverse)
    return out


def grouped_rows(groups: list[list[int]], stacked: Callable[[list[int]], tf.Tensor],
                 alone: Callable[[int], tf.Tensor]) -> tf.Tensor:
    """`[n, ...]`: a row per tensor, in index order, each group of `hooks.stacks.stack_groups` computed together.

    `stacked(group)` gives the rows `[k, ...]` of a group of two or more;
    `alone(i)` the row `[...]` of a tensor computed by itself. The lone rows
    are stacked into one table.

    Example:

    >>> grouped_rows([[0, 2], [1]], lambda g: tf.constant([[0.0], [2.0]]), lambda i: tf.constant([1.0])).numpy().ravel().tolist()
    [0.0, 1.0, 2.0]
    """
    rows: dict[int, tuple] = {}
    lone = [group[0] for group in groups if len(group) == 1]
    for group in groups:
        if len(group) > 1:
            table = stacked(group)
            rows.update({i: (table, row) for row, i in enumerate(group)})
    if lone:
        table = tf.stack([alone(i) for i in lone])
        rows.update({i: (table, row) for row, i in enumerate(lone)})
    return gather_rows([rows[i] for i in range(len(rows))])


def row_sums(stack: tf.Tensor) -> tf.Tensor:
    """`[k]`: the sum of each row of a stack `[k, ...]` (of its own dtype)."""
    rank = stack.shape.rank
    return stack if rank == 1 else tf.reduce_sum(stack, axis=list(range(1, rank)))


def row_squares(stack: tf.Tensor) -> tf.Tensor:
    """`[k]` float32: the squared norm of each row of a stack `[k, ...]`.

    >>> row_squares(tf.constant([[3.0, 4.0], [1.0, 0.0]])).numpy().tolist()
    [25.0, 1.0]
    """
    return row_sums(tf.square(as_float32(stack)))


def row_zeros(stack: tf.Tensor) -> tf.Tensor:
    """`[k]` float32: how many values of each row of a stack `[k, ...]` are exactly zero."""
    return row_sums(tf.cast(tf.equal(stack, tf.zeros([], stack.dtype)), tf.float32))


def sizes_of(tensors: list[tf.Tensor]) -> tf.Tensor:
    """The number of values of each tensor (int32 `[n]`): a constant when every shape is known."""
    static = [t.shape.num_elements() for t in tensors]
    if all(size is not None for size in static):
        return tf.constant(static, tf.int32)
    return tf.stack([tf.constant(size, tf.int32) if size is not None else tf.size(t, tf.int32)
                     for size, t in zip(static, tensors)])


def squared_norm(t) -> tf.Tensor:
    """The sum of squares of `t`, in float32 (one `L2Loss` op: no temporary the size of `t`)."""
    return 2.0 * tf.nn.l2_loss(as_float32(tf.convert_to_tensor(t)))


def total_squares(tensors: list[tf.Tensor]) -> tf.Tensor:
    """The sum of squares of every value of every tensor, in float32: one `L2Loss` per tensor, no temporary.

    Example:

    >>> float(total_squares([tf.constant([3.0]), tf.constant([[4.0]])]))
    25.0
    """
    if not tensors:
        return tf.constant(0.0)
    halves = [tf.nn.l2_loss(as_float32(tf.convert_to_tensor(t))) for t in tensors]
    return 2.0 * (tf.add_n(halves) if len(halves) > 1 else halves[0])


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
    per_example = _per_example(shape)
    if per_example is None:
        return values
    if per_example <= limit:
        return values[: _rows(per_example, limit)]
    return tf.reshape(values[:1], [-1])[::_stride(per_example, shape[-1], limit)][:limit]


def _per_example(shape: tf.TensorShape) -> int | None:
    """Values per example (axis 0) when known, or `None`: a vector, or an unknown per-example shape, is taken whole."""
    if shape.rank is None or shape.rank < 2 or not shape[1:].is_fully_defined():
        return None
    return max(1, shape[1:].num_elements())


def _rows(per_example: int, limit: int) -> int:
    """The leading examples a sample of at most `limit` values takes (at least one)."""
    return max(1, limit // per_example)


def _stride(per_example: int, last: int, limit: int) -> int:
    """The stride that samples one example's `per_example` values down to about `limit`, coprime to its last axis."""
    stride = -(-per_example // limit)
    if math.gcd(stride, last) != 1:
        stride = next(s for s in range(stride + 1, stride + last + 2) if math.gcd(s, last) == 1)
    return stride


def sample_bound(values: tf.Tensor, limit: int = ACTIVATION_SAMPLE) -> int | None:
    """The most values `leading_examples(values, limit)` can hold, known at trace time (`None`: unknown).

    Static even where the sample's shape is not: a step traced for any
    batch size takes `values[:k]`, whose row count is unknown but at most `k`.

    Example:

    >>> import tensorflow as tf
    >>> sample_bound(tf.TensorSpec([None, 26, 26, 32])), sample_bound(tf.TensorSpec([None, None]))
    (64896, None)
    """
    shape = values.shape
    per_example = _per_example(shape)
    if per_example is None:
        return shape.num_elements()
    if per_example > limit:
        return min(limit, -(-per_example // _stride(per_example, shape[-1], limit)))
    bound = per_example * _rows(per_example, limit)
    return bound if shape[0] is None else min(bound, shape.num_elements())


def moments(values: tf.Tensor) -> dict[str, tf.Tensor]:
    """min, max, mean and std of the finite view of a tensor."""
    x = tf.reshape(finite_or_zero(values), [-1])
    empty = tf.equal(tf.size(x), 0)
    mean, variance = tf.nn.moments(x, axes=[0])
    zero = tf.constant(0.0)
    return {
        "min": tf.where(empty, zero, tf.reduce_min(x)),
        "max": tf.where(empty, zero, tf.reduce_max(x)),
        "mean": tf.where(empty, zero, mean),
        "std": tf.where(empty, zero, tf.sqrt(variance)),
    }


def gradient_rows(grads: list) -> tf.Tensor:
    """`[k, 3]`: each gradient's squared norm, its zero values and its size (a `gradient_table`'s rows).

    Example:

    >>> gradient_rows([tf.constant([0.0, 3.0, 4.0])]).numpy().tolist()
    [[25.0, 1.0, 3.0]]
    """
    reducer = Reducer()
    groups = stack_groups([(g.shape if isinstance(g, tf.Tensor) else None, g.dtype) for g in grads])

    def stacked(group):  # a deep model's gradients of one shape: a few ops for all of them
        stack = tf.stack([grads[i] for i in group])
        return tf.stack([row_squares(stack), row_zeros(stack)], axis=1)

    def alone(i):
        return tf.stack([squared_norm(grads[i]), reducer.zeros(grads[i])])

    table = grouped_rows(groups, stacked, alone)
    return tf.concat([table, tf.cast(sizes_of(grads), tf.float32)[:, None]], axis=1)

