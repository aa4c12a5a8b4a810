"""Checks of the values of one tensor: finite, range, dtype, rank, predicate.

Example:

>>> import tensorflow as tf
>>> from tfguard import checks
>>> r = checks.in_range(0.0, 1.0)(tf.constant([0.5, 2.0]), target="pixels")
>>> bool(r.ok), int(r.bad)
(False, 1)
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from tfguard._errors import ContractError
from tfguard.checks._base import Check, CheckResult, count, is_floating, result, size_of


def _fmt(value) -> str:
    return f"{float(value):.6g}"


class Finite(Check):
    """Every value is finite: counts NaN, +Inf and -Inf separately.

    Integer tensors are always finite.

    Example:

    >>> import tensorflow as tf
    >>> r = Finite()(tf.constant([1.0, float("inf")]), target="loss")
    >>> int(r.details["posinf"])
    1
    """

    name = "finite"

    def flag(self, tensor):
        tensor = tf.convert_to_tensor(tensor)
        if not tensor.dtype.is_floating:
            return super().flag(tensor)
        return tf.reduce_all(tf.math.is_finite(tensor))

    def bad_values(self, tensor):
        tensor = tf.convert_to_tensor(tensor)
        if not tensor.dtype.is_floating:
            return tf.zeros(tf.shape(tensor), tf.bool)
        return tf.logical_not(tf.math.is_finite(tensor))

    def evaluate(self, tensor, target):
        total = size_of(tensor)
        if not is_floating(tensor):
            zero = tf.constant(0, tf.int64)
            return result(self.name, target, zero, total, {}, lambda v: "integer tensor")
        if tensor.dtype.is_complex:
            tensor = tf.concat([tf.math.real(tensor), tf.math.imag(tensor)], axis=0)
        nan = count(tf.math.is_nan(tensor))
        posinf = count(tf.equal(tensor, float("inf")))
        neginf = count(tf.equal(tensor, float("-inf")))

        def describe(v):
            return (
                f"{int(v['nan'])} NaN, {int(v['posinf'])} +Inf, {int(v['neginf'])} -Inf "
                f"of {int(v['total'])} values"
            )

        return result(
            self.name,
            target,
            nan + posinf + neginf,
            total,
            {"nan": nan, "posinf": posinf, "neginf": neginf},
            describe,
        )


def finite() -> Finite:
    """Returns a check that every value is finite (no NaN, +Inf, -Inf).

    Example:

    >>> import tensorflow as tf
    >>> bool(finite()(tf.constant([1.0, 2.0])).ok)
    True
    """
    return Finite()


class InRange(Check):
    """Every value lies in `[low, high]` (NaN counts as outside)."""

    name = "range"

    def __init__(self, low=None, high=None, inclusive=True):
        if low is None and high is None:
            raise ContractError(
                "Received an invalid range, expected at least one of `low` or `high`. "
                "Received: low=None, high=None"
            )
        if low is not None and high is not None and low > high:
            raise ContractError(
                f"Received an invalid range, expected low <= high. Received: low={low}, high={high}"
            )
        self.low, self.high, self.inclusive = low, high, inclusive

    def _inside(self, values):
        inside = None
        if self.low is not None:
            low = tf.cast(self.low, values.dtype)
            inside = values >= low if self.inclusive else values > low
        if self.high is not None:
            high = tf.cast(self.high, values.dtype)
            above = values <= high if self.inclusive else values < high
            inside = above if inside is None else inside & above
        return inside

    def flag(self, tensor):
        tensor = tf.convert_to_tensor(tensor)
        values = tensor if tensor.dtype.is_floating else tf.cast(tensor, tf.float64)
        return tf.reduce_all(self._inside(values))

    def bad_values(self, tensor):
        tensor = tf.convert_to_tensor(tensor)
        return tf.logical_not(self._inside(tensor if tensor.dtype.is_floating else tf.cast(tensor, tf.float64)))

    def evaluate(self, tensor, target):
        values = tf.cast(tensor, tf.float64) if not tensor.dtype.is_floating else tensor
        inside = self._inside(values)
        bad = count(tf.logical_not(inside))
        total = size_of(values)
        empty = tf.equal(total, 0)
        vmin = tf.where(empty, tf.constant(0, values.dtype), tf.reduce_min(values))
        vmax = tf.where(empty, tf.constant(0, values.dtype), tf.reduce_max(values))
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        brackets = ("[", "]") if self.inclusive else ("(", ")")
        interval = f"{brackets[0]}{lo}, {hi}{brackets[1]}"

        def describe(v):
            return (
                f"{int(v['bad'])} of {int(v['total'])} values outside {interval} "
                f"(received min {_fmt(v['min'])}, max {_fmt(v['max'])})"
            )

        return result(self.name, target, bad, total, {"min": vmin, "max": vmax}, describe)

    def __repr__(self):
        return f"in_range({self.low}, {self.high})"


def in_range(low=None, high=None, inclusive: bool = True) -> InRange:
    """Returns a check that every value lies in `[low, high]`.

    Example:

    >>> import tensorflow as tf
    >>> r = in_range(0, 1)(tf.constant([-2.0, 0.5, 2.0]), target="x")
    >>> int(r.bad)
    2

    Args:
        low: the smallest allowed value, or `None` for no bound. Defaults to `None`.
        high: the largest allowed value, or `None` for no bound. Defaults to `None`.
        inclusive: whether the bounds themselves are allowed. Defaults to `True`.

    Raises:
        ContractError: when neither bound is given or `low > high`.
    """
    return InRange(low, high, inclusive)


class DType(Check):
    """The tensor has one of the given dtypes (decided at trace time)."""

    name = "dtype"

    def __init__(self, *dtypes):
        if not dtypes:
            raise ContractError("Received no dtype, expected at least one, e.g. dtype('float32').")
        self.dtypes = tuple(tf.as_dtype(d) for d in dtypes)

    def evaluate(self, tensor, target):
        matches = tensor.dtype in self.dtypes
        bad = tf.constant(0 if matches else 1, tf.int64)
        expected = " or ".join(d.name for d in self.dtypes)
        received = tensor.dtype.name
        return result(
            self.name,
            target,
            bad,
            tf.constant(1, tf.int64),
            {},
            lambda v: f"expected dtype {expected}, received {received}",
        )


def dtype(*dtypes) -> DType:
    """Returns a check that the tensor's dtype is one of `dtypes`.

    Example:

    >>> import tensorflow as tf
    >>> bool(dtype("float32")(tf.constant([1], tf.int32)).ok)
    False
    """
    return DType(*dtypes)


class Rank(Check):
    """The tensor has the given rank."""

    name = "rank"

    def __init__(self, rank: int):
        if not isinstance(rank, int) or rank < 0:
            raise ContractError(
                f"Received an invalid value for `rank`, expected a non-negative integer. "
                f"Received: rank={rank!r}"
            )
        self.rank = rank

    def evaluate(self, tensor, target):
        actual = tf.rank(tensor)
        bad = tf.cast(tf.not_equal(actual, self.rank), tf.int64)
        expected = self.rank
        return result(
            self.name,
            target,
            bad,
            tf.constant(1, tf.int64),
            {"rank": actual},
            lambda v: f"expected rank {expected}, received rank {int(v['rank'])}",
        )


def rank(n: int) -> Rank:
    """Returns a check that the tensor has rank `n`.

    Example:

    >>> import tensorflow as tf
    >>> bool(rank(3)(tf.zeros([2, 4])).ok)
    False
    """
    return Rank(n)


class Predicate(Check):
    """A custom check: `fn(tensor)` returns a boolean tensor (elementwise or scalar)."""

    name = "predicate"

    def __init__(self, fn: Callable[[tf.Tensor], tf.Tensor], message: str, name: str = "predicate"):
        if not callable(fn):
            raise ContractError(
                f"Received an invalid value for `fn`, expected a callable. Received: fn={fn!r}"
            )
        self.fn, self.text, self.name = fn, message, name

    def evaluate(self, tensor, target):
        holds = tf.cast(self.fn(tensor), tf.bool)
        bad = count(tf.logical_not(holds))
        total = size_of(holds)
        text = self.text
        return result(
            self.name,
            target,
            bad,
            total,
            {},
            lambda v: f"{text} ({int(v['bad'])} of {int(v['total'])} values fail)",
        )


def predicate(fn, message: str, name: str = "predicate") -> Predicate:
    """Returns a custom check from a function that returns a boolean tensor.

    Example:

    >>> import tensorflow as tf
    >>> positive = predicate(lambda t: t > 0, "values must be positive")
    >>> int(positive(tf.constant([1.0, -1.0])).bad)
    1

    Args:
        fn: `tensor -> bool tensor`; every element must be True.
        message: what the check expects, used in the error.
        name: the check's name in reports. Defaults to `"predicate"`.
    """
    return Predicate(fn, message, name)


__all__ = ["CheckResult", "dtype", "finite", "in_range", "predicate", "rank"]
