"""Shape checks with symbolic dimensions shared across tensors.

Like `tf.debugging.assert_shapes`, but the result is a flag, not an assert:
a name such as `"B"` binds to the first tensor's size on that axis and every
other tensor must match it; an int must match exactly; `None` matches any
size; `"..."` as the first entry allows any leading dimensions.

Example:

>>> import tensorflow as tf
>>> from tfguard.checks import shapes
>>> results = shapes({"query": ("B", "T", "D"), "key": ("B", "T", "D")})(
...     {"query": tf.zeros([2, 5, 8]), "key": tf.zeros([2, 7, 8])})
>>> [bool(r.ok) for r in results]
[True, False]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import tensorflow as tf

from tfguard._errors import ContractError
from tfguard.checks._base import CheckResult, result
from tfguard.checks._verdict import raise_if_failed

Spec = Sequence[int | str | None]


def _validate(spec: Spec, target: str) -> tuple:
    spec = tuple(spec)
    for position, dim in enumerate(spec):
        ok = dim is None or isinstance(dim, (int, str))
        if not ok or (dim == "..." and position != 0):
            raise ContractError(
                f"Received an invalid shape spec for '{target}', expected ints, names or None "
                f"(and '...' only first). Received: {spec!r}"
            )
    return spec


class Shapes:
    """A check of several tensors' shapes against specs with shared names."""

    name = "shape"

    def __init__(self, specs: Mapping[str, Spec]):
        if not specs:
            raise ContractError("Received no shape specs, expected a mapping name -> spec.")
        self.specs = {name: _validate(spec, name) for name, spec in specs.items()}

    def __call__(self, tensors: Mapping[str, tf.Tensor]) -> list[CheckResult]:
        """Checks every named tensor; returns one result per tensor, in spec order."""
        bound: dict[str, tuple[str, tf.Tensor]] = {}
        results = []
        for target, spec in self.specs.items():
            if target not in tensors:
                raise ContractError(
                    f"Received no tensor for '{target}', expected one of the shape specs "
                    f"{sorted(self.specs)}. Received: {sorted(tensors)}"
                )
            results.append(self._check_one(tf.convert_to_tensor(tensors[target]), target, spec, bound))
        return results

    def check(self, tensors: Mapping[str, tf.Tensor], context: str = "shape check"):
        """Raises `GuardViolation` (eager) or returns graph asserts when a shape is off.

        Example:

        >>> import tensorflow as tf
        >>> shapes({"q": ("B", "T"), "k": ("B", "T")}).check({"q": tf.zeros([2, 3]), "k": tf.zeros([2, 3])})
        """
        return raise_if_failed(self(tensors), context)

    def _check_one(self, tensor, target, spec, bound):
        shape = tf.shape(tensor, out_type=tf.int64)
        rank = tf.size(shape)
        dims = list(spec)
        leading = bool(dims) and dims[0] == "..."
        if leading:
            dims = dims[1:]
        rank_ok = tf.greater_equal(rank, len(dims)) if leading else tf.equal(rank, len(dims))
        # Align from the end so "..." absorbs leading axes.
        padded = tf.concat([tf.zeros([len(dims)], tf.int64), shape], 0)[-len(dims):] if dims else shape[:0]
        problems = []
        mismatches = tf.constant(0, tf.int64)
        for axis, dim in enumerate(dims):
            actual = padded[axis]
            if dim is None:
                continue
            if isinstance(dim, int):
                expected, label = tf.constant(dim, tf.int64), f"{dim}"
            elif dim in bound:
                first_target, expected = bound[dim]
                label = f"{dim} (= size in '{first_target}')"
            else:
                bound[dim] = (target, actual)
                continue
            mismatches += tf.cast(tf.not_equal(actual, expected), tf.int64)
            problems.append((axis, label))
        bad = tf.where(rank_ok, mismatches, tf.constant(1, tf.int64))
        expected_text = "(" + ", ".join("..." if d == "..." else str(d) for d in spec) + ")"
        bound_text = {name: first for name, (first, _) in bound.items()}

        def describe(v):
            received = tuple(int(s) for s in v["shape"])
            named = ", ".join(f"{k} from '{t}'" for k, t in bound_text.items() if t != target)
            suffix = f"; names bound: {named}" if named else ""
            return f"expected shape {expected_text}, received {received}{suffix}"

        return result(self.name, target, bad, tf.constant(1, tf.int64), {"shape": shape}, describe)


def shapes(specs: Mapping[str, Spec]) -> Shapes:
    """Returns a check of several tensors' shapes with shared symbolic dimensions.

    Example:

    >>> import tensorflow as tf
    >>> check = shapes({"x": ("B", 4), "y": ("B",)})
    >>> [bool(r.ok) for r in check({"x": tf.zeros([3, 4]), "y": tf.zeros([2])})]
    [True, False]

    Args:
        specs: tensor name -> tuple of ints, names, `None` or a leading `"..."`.

    Raises:
        ContractError: when a spec is malformed or a named tensor is missing.
    """
    return Shapes(specs)


def shape(spec: Spec) -> Shapes:
    """Returns a check of one tensor's shape (see `shapes`); the tensor is named `tensor`.

    Example:

    >>> import tensorflow as tf
    >>> [bool(r.ok) for r in shape((None, 28, 28, 1))({"tensor": tf.zeros([8, 28, 28, 1])})]
    [True]
    """
    return Shapes({"tensor": spec})
