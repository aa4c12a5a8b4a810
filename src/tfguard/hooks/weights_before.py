"""The weights of a small update as they were before it, copied on recording steps only.

Weight norms and update ratios need each weight before and after its
update. Holding the value read before the update alive until the step's
end (as a guard's transaction does, to restore it) makes every in-place
write of the step copy its variable first, on every step: on a 200-layer
MLP that was most of the extra time of a step that records nothing.

So a step that does not restore (listeners, no guard) takes a copy at the
optimizer's door inside one functional `If` on the record flag: on a
recording step, every weight of the update flattened into one float32
vector (the reads die inside the branch, before the write); on the others,
an empty vector, and nothing is read or held. The recording branch at the
step's end slices each weight back out (`Copied.value`). Only for an update
of at most `GuardConfig.hold_bytes` of state: a large one takes its weight
table right after its write instead (`dry_run.weight_table_across`).

Example:

>>> import tensorflow as tf
>>> w = tf.Variable([[1.0, 2.0]])
>>> copied = copy_before([w], tf.constant(True))
>>> _ = w.assign([[5.0, 6.0]])
>>> copied.value(w).numpy().tolist(), copied.holds(w)
([[1.0, 2.0]], True)
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfguard.hooks.branch import rare_cond
from tfguard.hooks.transaction import tf_variable


@dataclasses.dataclass(frozen=True)
class Copied:
    """Weights copied before an update: one float32 vector, and where each weight lies in it.

    Args:
        packed: every weight flattened, one after the other (empty on steps that do not record).
        places: tf variable id -> `(start, shape)` in `packed`.
    """

    packed: tf.Tensor
    places: dict

    def holds(self, variable) -> bool:
        """Whether `variable` was copied."""
        return id(tf_variable(variable)) in self.places

    def value(self, variable) -> tf.Tensor:
        """`variable` as it was before the update, in float32: only in a branch that runs on recording steps."""
        start, shape = self.places[id(tf_variable(variable))]
        return tf.reshape(self.packed[start:start + shape.num_elements()], shape)


def copy_before(variables, record_flag) -> Copied:
    """Copies `variables` (float, of known shape) into one vector when `record_flag` holds, else nothing.

    Args:
        variables: Keras or TensorFlow variables, read now (before the update writes them).
        record_flag: a bool variable or tensor: whether this step records.

    Returns:
        The `Copied` weights (variables of unknown shape are left out).
    """
    places, start, known = {}, 0, []
    for variable in variables:
        tf_var = tf_variable(variable)
        shape = tf.TensorShape(tf_var.shape)
        if not shape.is_fully_defined() or id(tf_var) in places:
            continue
        places[id(tf_var)] = (start, shape)
        start += shape.num_elements()
        known.append(tf_var)

    def copy():
        return tf.concat([tf.reshape(tf.cast(tf.convert_to_tensor(v), tf.float32), [-1]) for v in known]
                         + [tf.zeros([0])], axis=0)  # a concat of two or more: always a copy

    packed = rare_cond(tf.convert_to_tensor(record_flag), copy, lambda: tf.zeros([0])) if known else tf.zeros([0])
    return Copied(packed, places)


__all__ = ["Copied", "copy_before"]
