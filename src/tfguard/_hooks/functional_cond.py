"""A `tf.cond` whose branch rarely runs, kept as one functional `If` in the graph.

Inside a `tf.function` (without XLA) TensorFlow lowers a `tf.cond` to
`Switch`/`Merge` nodes: one `Switch` per tensor the branch captures, run on
every step whether the branch runs or not. The guard's rarely taken branches capture
a lot: the restore of a rejected step takes every held value, the exact
NaN/Inf count every checked tensor, a recording step's signals every
gradient and weight. Kept functional, such a branch costs one `If` op on the
steps that do not take it, and no walk of its body: the `If` still hands
the branch each tensor it captures (its argument nodes run, about a
microsecond each on a CPU, a variable's handle a little more), so a
branch over hundreds of tensors is not free (`benchmarks/HISTORY.md`,
sixth session), but cheaper than lowered. XLA compiles the `If` as
it would any cond. Under a `tf.distribute` strategy the cond is lowered as
usual (a functional `If` cannot take variables placed on several devices).

Not for a branch that takes values the step would otherwise free early (the
optimizer's apply: gradients): a functional `If` holds its inputs until it
has run, which kept every gradient of a 50 M-parameter MLP alive ~130 MB
longer than a lowered cond does.

Example:

>>> import tensorflow as tf
>>> @tf.function
... def f(p):
...     return keep_cond_functional(tf.cond(p, lambda: tf.constant(1), lambda: tf.constant(0)))
>>> int(f(tf.constant(True))), int(f(tf.constant(False)))
(1, 0)

The caller builds the cond and hands its outputs here: nothing of the
caller's runs from this module.
"""

from __future__ import annotations

import tensorflow as tf

from tfguard._hooks import tf_compat

_IF = ("If", "StatelessIf")


def keep_cond_functional(out):
    """Keeps the `tf.cond` that made `out` from being lowered to `Switch`/`Merge`; returns `out`.

    `out` must be what `tf.cond` returned, not a tensor computed from it:
    the first `If` up the chain of first inputs is the one kept. Eagerly or
    under a strategy, `out` is returned as it is.
    """
    if tf.executing_eagerly() or tf.distribute.has_strategy():
        return out  # under a strategy the replicas' variables live on several devices: one If cannot hold them
    for tensor in tf.nest.flatten(out):
        op = getattr(tensor, "op", None)
        while op is not None and op.type not in _IF and op.inputs:
            op = op.inputs[0].op
        if op is not None and op.type in _IF:
            tf_compat.keep_functional(op)
            break
    return out


__all__ = ["keep_cond_functional"]
