"""Checks of training targets: integer labels, one-hot rows, probability rows.

Example:

>>> import tensorflow as tf
>>> from tfguard.checks import labels
>>> r = labels(10)(tf.constant([0, 3, 12]), target="y")
>>> bool(r.ok), int(r.bad)
(False, 1)
"""

from __future__ import annotations

import tensorflow as tf

from tfguard._errors import ContractError
from tfguard.checks._base import Check, count, result, size_of


class Labels(Check):
    """Integer class ids in `[0, num_classes)`; float labels must be whole numbers."""

    name = "labels"

    def __init__(self, num_classes: int):
        if not isinstance(num_classes, int) or num_classes < 1:
            raise ContractError(
                "Received an invalid value for `num_classes`, expected a positive integer. "
                f"Received: num_classes={num_classes!r}"
            )
        self.num_classes = num_classes

    def flag(self, tensor):
        tensor = tf.convert_to_tensor(tensor)
        if not tensor.dtype.is_integer:
            return super().flag(tensor)
        n = tf.cast(self.num_classes, tensor.dtype)
        return tf.reduce_all((tensor >= 0) & (tensor < n))

    def _inside(self, tensor):
        values = tf.cast(tensor, tf.float64)
        return (values >= 0) & (values < self.num_classes) & tf.equal(values, tf.round(values))

    def bad_values(self, tensor):
        return tf.logical_not(self._inside(tf.convert_to_tensor(tensor)))

    def evaluate(self, tensor, target):
        values = tf.cast(tensor, tf.float64)
        inside = self._inside(values)
        total = size_of(values)
        empty = tf.equal(total, 0)
        vmin = tf.where(empty, tf.constant(0.0, tf.float64), tf.reduce_min(values))
        vmax = tf.where(empty, tf.constant(0.0, tf.float64), tf.reduce_max(values))
        n = self.num_classes

        def describe(v):
            return (
                f"{int(v['bad'])} of {int(v['total'])} labels outside the class ids "
                f"[0, {n}) (received min {float(v['min']):g}, max {float(v['max']):g})"
            )

        return result(
            self.name,
            target,
            count(tf.logical_not(inside)),
            total,
            {"min": vmin, "max": vmax},
            describe,
        )


def labels(num_classes: int) -> Labels:
    """Returns a check that integer labels are class ids in `[0, num_classes)`.

    Example:

    >>> import tensorflow as tf
    >>> bool(labels(3)(tf.constant([0, 1, 2])).ok)
    True

    Args:
        num_classes: the number of output units of the classifier.

    Raises:
        ContractError: when `num_classes` is not a positive integer.
    """
    return Labels(num_classes)


class Distribution(Check):
    """Rows on the last axis are probability vectors (or exactly one-hot)."""

    def __init__(self, one_hot_only: bool, atol: float):
        self.one_hot_only = one_hot_only
        self.atol = atol
        self.name = "one_hot" if one_hot_only else "probabilities"

    def evaluate(self, tensor, target):
        values = tf.cast(tensor, tf.float64)
        rows = tf.reshape(values, [-1, tf.shape(values)[-1]]) if values.shape.rank else values
        in_unit = tf.reduce_all((rows >= 0) & (rows <= 1), axis=-1)
        sums_to_one = tf.abs(tf.reduce_sum(rows, axis=-1) - 1.0) <= self.atol
        good = in_unit & sums_to_one
        if self.one_hot_only:
            good &= tf.reduce_all(tf.equal(rows, 0) | tf.equal(rows, 1), axis=-1)
        bad = count(tf.logical_not(good))
        total = tf.cast(tf.shape(rows)[0], tf.int64)
        kind = "one-hot rows" if self.one_hot_only else f"probability rows (sum 1 +- {self.atol:g})"
        empty = tf.equal(size_of(rows), 0)
        row_sums = tf.reduce_sum(rows, axis=-1)
        worst = tf.where(
            empty, tf.constant(1.0, tf.float64), row_sums[tf.argmax(tf.abs(row_sums - 1.0))]
        )

        def describe(v):
            return (
                f"{int(v['bad'])} of {int(v['total'])} rows are not {kind} "
                f"(worst row sums to {float(v['worst_sum']):.6g})"
            )

        return result(self.name, target, bad, total, {"worst_sum": worst}, describe)


def one_hot() -> Distribution:
    """Returns a check that every row on the last axis is exactly one-hot.

    Example:

    >>> import tensorflow as tf
    >>> bool(one_hot()(tf.constant([[0.0, 1.0], [0.5, 0.5]])).ok)
    False
    """
    return Distribution(one_hot_only=True, atol=0.0)


def probabilities(atol: float = 1e-3) -> Distribution:
    """Returns a check that every row is a probability vector (in [0, 1], sums to 1).

    Example:

    >>> import tensorflow as tf
    >>> bool(probabilities()(tf.constant([[0.2, 0.8]])).ok)
    True

    Args:
        atol: the tolerance on the row sum. Defaults to `1e-3`.
    """
    return Distribution(one_hot_only=False, atol=atol)
