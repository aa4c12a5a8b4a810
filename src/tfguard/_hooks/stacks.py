"""Small tensors of one shape, stacked: one op for all of them where there was one each.

Each op of a step costs the executor a few microseconds however small it
is; a deep model's step has thousands of small variables, most of a few
shapes (a 200-layer MLP: 1,506 variables and slots of three shapes). What
is done to each of them (held before the step, copied for statistics,
reduced to a norm) is done to one stack per shape instead.
`stack_groups` says which tensors go together, `take_rows` reads some
rows of a stack back.

Example:

>>> import tensorflow as tf
>>> a, b = (tf.TensorShape([2, 2]), tf.float32), (tf.TensorShape([3]), tf.float32)
>>> stack_groups([a, b, a, (None, tf.float32), a], most=8)
[[0, 2], [4], [1], [3]]
"""

from __future__ import annotations

import tensorflow as tf

STACKABLE = 2**16
"""Tensors of at most this many values are stacked with the others of their shape and dtype."""

STACKED_VALUES = 2**20
"""The most values one stack holds (4 MB of float32): a larger group is split into several."""


def stack_groups(shapes: list, limit: int = STACKABLE, most: int = STACKED_VALUES) -> list[list[int]]:
    """Which tensors to stack together: indices of tensors of one known shape and dtype, in order; the rest alone.

    Args:
        shapes: a `(shape, dtype)` pair per tensor (`shape` `None` or partly
            unknown: the tensor is alone).
        limit: a tensor of more values is alone. Defaults to `STACKABLE`.
        most: the most values of one group. Defaults to `STACKED_VALUES`.

    Returns:
        The groups of two or more, by first member, then the lone tensors,
        each a group of one.
    """
    groups: dict = {}
    alone: list[list[int]] = []
    for i, (shape, dtype) in enumerate(shapes):
        shape = tf.TensorShape(shape)
        size = shape.num_elements() if shape.is_fully_defined() else None
        if size is None or size > limit:
            alone.append([i])
            continue
        chunks = groups.setdefault((tuple(shape), dtype), [[]])
        if chunks[-1] and (len(chunks[-1]) + 1) * max(size, 1) > most:
            chunks.append([])
        chunks[-1].append(i)
    chunks = [chunk for per_shape in groups.values() for chunk in per_shape]
    return [c for c in chunks if len(c) > 1] + [c for c in chunks if len(c) == 1] + alone


def take_rows(stack: tf.Tensor, rows: list[int], size: int | None = None) -> tf.Tensor:
    """Rows `rows` of `stack`, in that order: the stack itself when they are all of its `size` rows in order, else one gather.

    `size` defaults to the stack's static first dimension (pass it when the
    stack comes out of a branch whose other side is empty).

    >>> take_rows(tf.constant([[1.0], [2.0], [3.0]]), [2, 0]).numpy().ravel().tolist()
    [3.0, 1.0]
    """
    size = stack.shape[0] if size is None and stack.shape.rank else size
    if size is not None and rows == list(range(size)):
        return stack
    return tf.gather(stack, rows)


__all__ = ["STACKABLE", "STACKED_VALUES", "stack_groups", "take_rows"]
