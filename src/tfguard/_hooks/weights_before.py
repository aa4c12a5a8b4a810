"""The weights of a small update as they were before it, copied on recording steps only.

Weight norms and update ratios need each weight before and after its
update. Holding the value read before the update alive until the step's
end (as a guard's transaction does, to restore it) makes every in-place
write of the step copy its variable first, on every step: on a 200-layer
MLP that was most of the extra time of a step that records nothing.

So a step that does not restore (listeners, no guard) takes a copy at the
optimizer's apply inside one functional `If` on the record flag: on a
recording step, the small weights of one shape as one float32 stack
(`hooks.stacks`), the others flattened into one float32 vector (the reads
die inside the branch, before the write); on the others, empty tensors,
and nothing is read or held. The recording branch at the step's end takes
a stack whole (`Copied.stacked`) or a weight back out (`Copied.value`). Only for an update
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

from tfguard._hooks.functional_cond import keep_cond_functional
from tfguard._hooks.stacks import stack_groups, take_rows
from tfguard._hooks.transaction import tf_variable


@dataclasses.dataclass(frozen=True)
class Copied:
    """Weights copied before an update: stacks of the small ones of one shape, and one vector of the others.

    Args:
        packed: every weight that is not stacked, flattened, one after the
            other (empty on steps that do not record).
        places: tf variable id -> `(start, shape)` in `packed`.
        stacks: float32 `[k, ...]`, the weights of one shape (empty on steps that do not record).
        rows: tf variable id -> `(stack index, row)`.
    """

    packed: tf.Tensor
    places: dict
    stacks: tuple = ()
    rows: dict = dataclasses.field(default_factory=dict)

    @property
    def tensors(self) -> list[tf.Tensor]:
        """Every tensor the copy made (what the update waits for)."""
        return [self.packed, *self.stacks]

    def holds(self, variable) -> bool:
        """Whether `variable` was copied."""
        key = id(tf_variable(variable))
        return key in self.places or key in self.rows

    def value(self, variable) -> tf.Tensor:
        """`variable` as it was before the update, in float32: only in a branch that runs on recording steps."""
        key = id(tf_variable(variable))
        if key in self.rows:
            stack, row = self.rows[key]
            return self.stacks[stack][row]
        start, shape = self.places[key]
        return tf.reshape(self.packed[start:start + shape.num_elements()], shape)

    def stacked(self, variables) -> tf.Tensor | None:
        """The copies of `variables` as one stack `[k, ...]` if they are rows of one stack (else `None`)."""
        taken = [self.rows.get(id(tf_variable(v))) for v in variables]
        if not taken or any(t is None or t[0] != taken[0][0] for t in taken):
            return None
        index = taken[0][0]
        size = sum(1 for stack, _ in self.rows.values() if stack == index)
        return take_rows(self.stacks[index], [row for _, row in taken], size)


def copy_before(variables, record_flag) -> Copied:
    """Copies `variables` (float, of known shape) when `record_flag` holds, else nothing.

    The small ones of one shape are stacked (`hooks.stacks`), the others
    flattened into one vector.

    Args:
        variables: Keras or TensorFlow variables, read now (before the update writes them).
        record_flag: a bool variable or tensor: whether this step records.

    Returns:
        The `Copied` weights (variables of unknown shape are left out).
    """
    known, seen = [], set()
    for variable in variables:
        tf_var = tf_variable(variable)
        if tf.TensorShape(tf_var.shape).is_fully_defined() and id(tf_var) not in seen:
            seen.add(id(tf_var))
            known.append(tf_var)
    groups = stack_groups([(v.shape, v.dtype) for v in known])
    stacked = [[known[i] for i in group] for group in groups if len(group) > 1]
    lone = [known[group[0]] for group in groups if len(group) == 1]
    places, start = {}, 0
    for tf_var in lone:
        shape = tf.TensorShape(tf_var.shape)
        places[id(tf_var)] = (start, shape)
        start += shape.num_elements()
    rows = {id(v): (index, row) for index, members in enumerate(stacked) for row, v in enumerate(members)}

    def read(v):
        return tf.cast(tf.convert_to_tensor(v), tf.float32)

    def copy():
        packed = tf.concat([tf.reshape(read(v), [-1]) for v in lone] + [tf.zeros([0])], axis=0)  # two or more: a copy
        return [packed, *[tf.stack([read(v) for v in members]) for members in stacked]]

    def nothing():
        return [tf.zeros([0]), *[tf.zeros([0, *members[0].shape]) for members in stacked]]

    if not known:
        return Copied(tf.zeros([0]), {})
    made = keep_cond_functional(tf.cond(tf.convert_to_tensor(record_flag), copy, nothing))
    return Copied(made[0], places, tuple(made[1:]), rows)


__all__ = ["Copied", "copy_before"]
