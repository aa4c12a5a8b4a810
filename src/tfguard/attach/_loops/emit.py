"""Values a loop's step measured, handed to the host on the steps that record, and only there.

A hand-written loop's step runs the user's `tf.function`: tfguard cannot
add outputs to it. `emit(due, step, moved, compute, receive)` builds, in the
step, one `tf.cond` on `due` whose branch computes the values
(`compute()` returns their keys and one float32 vector) and hands them to
`receive(step, moved, keys, values)` through a `tf.py_function`: a step
that does not record runs one `If` op, nothing of the branch. Eagerly the
branch is a Python `if`. `due_at(step, dense, every)` is the Logger's
schedule: each of the first `dense` steps, then every `every`-th
(steps 1, 11, 21, ... as a fit's records).

Example:

>>> import tensorflow as tf
>>> seen = []
>>> @tf.function
... def step(s):
...     emit(due_at(s, 0, 10), s, tf.constant(True),
...          lambda: (["x"], tf.constant([float(1)])), lambda *args: seen.append(args[0]))
>>> for s in range(1, 23):
...     step(tf.constant(s, tf.int64))
>>> seen
[1, 11, 21]
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfguard._hooks.functional_cond import keep_cond_functional


def due_at(step, dense: int, every: int):
    """Whether global `step` records: `step <= dense` or `(step - 1) % every == 0` (a bool tensor, or a bool)."""
    if isinstance(step, int):
        return step <= dense or (step - 1) % every == 0
    step = tf.cast(step, tf.int64)
    return tf.logical_or(step <= dense, tf.equal(tf.math.floormod(step - 1, every), 0))


def emit(due, step, moved, compute: Callable[[], tuple[list, tf.Tensor]],
         receive: Callable[[int, bool, list, np.ndarray], None]) -> None:
    """Computes and hands the values to `receive` where `due` holds (see the module)."""
    if tf.executing_eagerly():
        if bool(due):
            keys, vector = compute()
            receive(int(step), bool(moved), keys, np.asarray(vector))
        return

    def record():
        keys, vector = compute()

        def host(at, went, values):
            receive(int(at), bool(went), keys, values.numpy())
            return np.int32(0)

        done = tf.py_function(host, [step, moved, vector], tf.int32)
        with tf.control_dependencies([done]):
            return tf.constant(True)

    keep_cond_functional(tf.cond(tf.convert_to_tensor(due), record, lambda: tf.constant(False)))


__all__ = ["due_at", "emit"]
