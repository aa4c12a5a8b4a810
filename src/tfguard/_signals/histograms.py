"""Histograms in the step and on the host: what a histogram step buckets, and where.

Three sources, each bucketed where it costs least (`tfguard._signals.buckets`
does the bucketing itself):

- gradients at the optimizer's apply, before the update
  (`tfguard._firewall.apply_interception.gradient_buckets`), so they die with the update;
- layer outputs from their leading examples (`Sample`), in branches of the
  recording step that run as the forward pass makes them
  (`histograms_when`);
- weights by the host after the step (`HostHistograms`): the weights
  after the update are what the host reads once the step has run, and
  bucketing hundreds of variables in the step cost a large model its trace
  (ResNet50: ~3 k ops and 30 loops, ~80 MB kept for the life of the step
  function).

Example:

>>> import tensorflow as tf
>>> histograms_of([tf.constant([0.0, 1.0, 1.0])]).shape
TensorShape([1, 30, 3])
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfguard._hooks.functional_cond import keep_cond_functional
from tfguard._signals import buckets, stats

HIST_BUCKETS = 30


@dataclasses.dataclass(frozen=True, eq=False)
class Sample:
    """A layer output whose histogram is taken from its leading examples (`stats.leading_examples`), when due.

    `values()` makes the sample (call it inside the branch that buckets it);
    `bound` is the most values it can hold, known at trace time even when
    the batch size is not.
    """

    tensor: tf.Tensor

    def values(self) -> tf.Tensor:
        return stats.leading_examples(self.tensor)

    @property
    def bound(self) -> int | None:
        return stats.sample_bound(self.tensor)


@dataclasses.dataclass(frozen=True)
class Bucketed:
    """A histogram already bucketed: row `row` of a `[k, HIST_BUCKETS, 3]` table."""

    table: tf.Tensor
    row: int


def histograms_of(values: list) -> tf.Tensor:
    """`[n, HIST_BUCKETS, 3]` buckets of each value (a tensor, a variable read now, or a `Sample`), in one pass.

    Example:

    >>> import tensorflow as tf
    >>> histograms_of([tf.constant([0.0, 1.0, 1.0]), Sample(tf.ones([4, 2]))])[:, :, 2].numpy().sum(axis=1).tolist()
    [3.0, 8.0]
    """
    tensors = [v.values() if isinstance(v, Sample) else tf.convert_to_tensor(v) for v in values]
    bounds = [v.bound if isinstance(v, Sample) else None for v in values]
    return buckets.buckets_many(tensors, HIST_BUCKETS, bounds=bounds)


def histograms_when(flag: tf.Tensor, values: dict) -> tf.Tensor:
    """In the step: `[n, HIST_BUCKETS, 3]` buckets of every histogram value when `flag` holds, zeros otherwise.

    The forward pass's values (`Sample`s: activations) are bucketed in
    branches of their own, one per group of at most `HISTOGRAM_CHUNK`
    values (`buckets.groups_of`, in layer order): a branch runs as soon as
    its layers have run, during the forward pass, and a branch holds its
    inputs until it is done. With one branch for every histogram, every
    activation lived to the end of the step, through the backward pass
    (ResNet50, batch 16: ~250 MB more at the step's peak). Gradients not
    bucketed as their update was applied get one branch after the backward
    pass; the tables bucketed as each update was applied (`Bucketed`) are read as they are.

    Example:

    >>> import tensorflow as tf
    >>> values = {"a": Sample(tf.constant([0.0, 1.0])), "g": tf.constant([2.0])}
    >>> histograms_when(tf.constant(True), values)[:, :, 2].numpy().sum(axis=1).tolist()
    [2.0, 1.0]
    >>> float(tf.reduce_sum(histograms_when(tf.constant(False), values)))
    0.0
    """
    items = list(values.values())
    forward = [v for v in items if isinstance(v, Sample)]
    rest = [v for v in items if not isinstance(v, (Sample, Bucketed))]
    parts = [[forward[i] for i in group] for group in buckets.groups_of([v.bound for v in forward])]
    rows = {}
    for part in [*parts, rest]:
        if part:
            table = tf.cond(flag, lambda part=part: histograms_of(part), lambda part=part: _none_bucketed(part))
            keep_cond_functional(table)
            rows.update({id(v): (table, row) for row, v in enumerate(part)})
    return stats.gather_rows([(v.table, v.row) if isinstance(v, Bucketed) else rows[id(v)] for v in items])


def _none_bucketed(values: list) -> tf.Tensor:
    """The zeros a histogram branch returns when it does not run."""
    return tf.zeros([len(values), HIST_BUCKETS, 3])


class HostHistograms:
    """`tag -> [HIST_BUCKETS, 3]` NumPy buckets of `(tag, variable)` pairs, read after the step.

    The same buckets as in the step (`histograms_of`), one group of
    variables after another (the working memory of one group), in one
    traced function per set of weights, traced at its first use. Run
    eagerly, the bucketing was an eager op per variable and group: a
    200-layer MLP's 703 weights took 1,261 eager ops and ~23 ms every
    histogram step.

    Example:

    >>> import keras
    >>> w = keras.Variable([0.0, 1.0, 1.0])
    >>> float(HostHistograms()([("weights/w", w)])["weights/w"][:, 2].sum())
    3.0
    """

    def __init__(self):
        self._functions: dict[tuple, object] = {}

    def __call__(self, weights) -> dict:
        if not weights:
            return {}
        key = tuple(id(variable) for _, variable in weights)
        function = self._functions.get(key)
        if function is None:
            variables = [variable for _, variable in weights]
            function = self._functions[key] = tf.function(lambda: histograms_of(variables), autograph=False)
        return dict(zip((tag for tag, _ in weights), function().numpy().astype("float64")))


__all__ = ["HIST_BUCKETS", "Bucketed", "HostHistograms", "Sample", "histograms_of", "histograms_when"]
