"""Batches for the invariant checks: rows taken, rows altered, labels changed.

The checks run the model's own functions on the first batch of a fit: the
same rows alone, the same rows among other rows, the same batch with other
labels. These helpers build those variants for any structure Keras accepts
(arrays, tuples, dicts of features), without copying more than one batch.

Example:

>>> import numpy as np
>>> x = {"a": np.arange(6.0).reshape(3, 2), "b": np.arange(3)}
>>> rows(x), take(x, 2)["b"].tolist()
(3, [0, 1])
>>> other_labels(np.array([0, 2, 1]), classes=3).tolist()
[1, 0, 2]
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def _arrays(data):
    return tf.nest.map_structure(
        lambda t: t if t is None else (t.numpy() if hasattr(t, "numpy") else np.asarray(t)), data)


def to_numpy(data):
    """The batch as numpy arrays (same structure); `None` stays `None`."""
    return _arrays(data)


def rows(data) -> int | None:
    """The batch size of a structure of arrays (its first leaf's first dimension), or `None`."""
    for leaf in tf.nest.flatten(data):
        shape = getattr(leaf, "shape", None)
        if shape is not None and len(shape) >= 1 and shape[0] is not None:
            return int(shape[0])
    return None


def take(data, count: int):
    """The first `count` rows of every leaf."""
    return tf.nest.map_structure(lambda a: a if a is None else a[:count], data)


def reorder(data, keep: int):
    """The first `keep` rows unchanged, the others in reverse order."""
    return tf.nest.map_structure(
        lambda a: a if a is None else np.concatenate([a[:keep], a[keep:][::-1]], axis=0), data)


def replace_rest(data, keep: int):
    """The first `keep` rows unchanged, each other row replaced by the last row (other neighbours)."""
    def change(a):
        if a is None:
            return a
        rest = np.repeat(a[-1:], len(a) - keep, axis=0)
        return np.concatenate([a[:keep], rest], axis=0)
    return tf.nest.map_structure(change, data)


def rows_differ(data) -> bool:
    """Whether the rows of the batch's first numeric leaf are not all identical."""
    for leaf in tf.nest.flatten(data):
        a = np.asarray(leaf)
        if a.ndim >= 1 and len(a) > 1:
            return bool(np.any(a.reshape(len(a), -1) != a.reshape(len(a), -1)[:1]))
    return False


def other_labels(y: np.ndarray, classes: int | None = None) -> np.ndarray:
    """Labels that differ from `y` everywhere, and stay in the range the loss accepts.

    Integer class ids become the next class (mod `classes`), one-hot or
    probability rows roll by one class, labels in [0, 1] become `1 - y`,
    other numbers move by a different amount in each row (a loss that
    centres its targets would not see one common shift).

    Args:
        y: the labels of one batch.
        classes: the number of classes, when known (the model's output units). Defaults to `None`.

    Returns:
        An array of the same shape and dtype.
    """
    y = np.asarray(y)
    if y.dtype.kind in "iub":
        top = int(classes) if classes and classes > 1 else int(y.max()) + 2
        return ((y.astype(np.int64) + 1) % top).astype(y.dtype)
    if y.ndim >= 2 and y.shape[-1] > 1 and np.all(y >= 0) and np.allclose(y.sum(-1), 1.0):
        return np.roll(y, 1, axis=-1)
    if y.size and np.all((y >= 0) & (y <= 1)) and np.any(y != 0.5):
        return (1 - y).astype(y.dtype)
    scale = float(np.std(y)) or 1.0
    ramp = (1.0 + np.arange(len(y)) / max(1, len(y))).reshape((-1,) + (1,) * (y.ndim - 1))
    return (y + scale * ramp).astype(y.dtype)


def other_label_structure(y, classes: int | None = None):
    """`other_labels` applied to every leaf of a label structure."""
    return tf.nest.map_structure(lambda a: a if a is None else other_labels(a, classes), y)


__all__ = ["other_label_structure", "other_labels", "reorder", "replace_rest", "rows",
           "rows_differ", "take", "to_numpy"]
