"""The shape every tfguard check shares: tensors in, flags and counts out.

A check never raises inside the graph. It turns a tensor into a
`CheckResult` of tensors (`ok`, `bad`, `total` and a few details); the host
decides what a failed flag means (raise, skip the step, warn). That keeps a
check valid under XLA, where `tf.debugging.Assert` compiles to nothing.

Example:

>>> import tensorflow as tf
>>> from tfguard.checks import finite
>>> result = finite()(tf.constant([1.0, float("nan")]), target="x")
>>> bool(result.ok), int(result.bad)
(False, 1)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """What one check found on one tensor, as tensors.

    Args:
        check: the check's name, e.g. `"finite"`.
        target: what was checked, e.g. `"x"` or `"gradient of 'dense/kernel'"`.
        ok: scalar bool tensor, True when the check holds.
        bad: scalar int64 tensor, the number of offending values.
        total: scalar int64 tensor, the number of values looked at.
        details: extra scalar tensors the message uses (NaN count, min, max...).
        describe: a host-side function `(numpy details) -> str` that words a
            failure, e.g. `"3 NaN, 0 +Inf, 0 -Inf of 4096 values"`.
    """

    check: str
    target: str
    ok: tf.Tensor
    bad: tf.Tensor
    total: tf.Tensor
    details: Mapping[str, tf.Tensor]
    describe: Callable[[Mapping[str, np.ndarray]], str]

    def tensors(self) -> dict[str, tf.Tensor]:
        """All tensors of the result, to evaluate in one go."""
        return {"ok": self.ok, "bad": self.bad, "total": self.total, **self.details}

    def message(self, values: Mapping[str, np.ndarray]) -> str:
        """Words a failed result from its evaluated tensors."""
        return f"{self.target} failed check '{self.check}': {self.describe(values)}"


class Check:
    """A declarative check of one tensor.

    Subclasses implement `evaluate(tensor, target)`. `__call__` converts the
    input to a tensor and names the target.
    """

    name = "check"

    def evaluate(self, tensor: tf.Tensor, target: str) -> CheckResult:  # pragma: no cover
        raise NotImplementedError

    def flag(self, tensor) -> tf.Tensor:
        """Only whether the check holds (a scalar bool): cheaper than `evaluate`."""
        return self.evaluate(tf.convert_to_tensor(tensor), "tensor").ok

    def bad_values(self, tensor) -> tf.Tensor | None:
        """A bool tensor of `tensor`'s shape, true at each value the check rejects; `None` for a check
        that does not judge values one by one (a dtype, a rank, a shape)."""
        return None

    def __call__(self, tensor, target: str = "tensor") -> CheckResult:
        return self.evaluate(tf.convert_to_tensor(tensor), target)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def size_of(tensor: tf.Tensor) -> tf.Tensor:
    """The number of values in `tensor` as an int64 scalar."""
    return tf.size(tensor, out_type=tf.int64)


def count(mask: tf.Tensor) -> tf.Tensor:
    """The number of True values in a boolean mask as an int64 scalar."""
    return tf.reduce_sum(tf.cast(mask, tf.int64))


def is_floating(tensor: tf.Tensor) -> bool:
    """Whether the tensor holds floating-point (or complex) values."""
    return tensor.dtype.is_floating or tensor.dtype.is_complex


def result(check: str, target: str, bad: tf.Tensor, total: tf.Tensor, details, describe):
    """Builds a `CheckResult` whose `ok` is `bad == 0`."""
    return CheckResult(
        check=check,
        target=target,
        ok=tf.equal(bad, 0),
        bad=bad,
        total=total,
        details=dict(details),
        describe=describe,
    )
