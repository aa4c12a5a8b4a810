"""A step as a transaction: hold the state it may change, put it back if the step is rejected.

A training step changes more than the trainable weights: optimizer slots and
iterations, BatchNormalization's moving statistics (assigned in the forward
pass), any `add_weight(trainable=False)` a layer assigns in `call`, metric
states and seed generators. Gating only the optimizer leaves the rest
poisoned by a bad batch. The transaction holds the value of every such
variable before the step changes it (a read: TensorFlow copies a buffer
only when the step then writes it in place) and, when the step is
rejected, assigns every held value back under one `tf.cond`, so a rejected
step leaves the model bitwise as it was.

Under a `tf.distribute` strategy the restore runs where each variable can
be written: mirrored variables through `strategy.extended.update` (in the
replica context where the strategy allows it, in a merge call otherwise, as
Keras's optimizers do), sync-on-read variables (metrics) on their local
replica.

Example:

>>> import tensorflow as tf
>>> v = tf.Variable([1.0, 2.0])
>>> txn = Transaction()
>>> txn.hold([v])
>>> _ = v.assign([float("nan"), 0.0])
>>> txn.restore_if(tf.logical_not(txn.all_finite()))
>>> v.numpy().tolist()
[1.0, 2.0]
"""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from tfguard._hooks import tf_compat
from tfguard._hooks.functional_cond import keep_cond_functional
from tfguard._hooks.stacks import stack_groups, take_rows


def tf_variable(variable):
    """The TensorFlow variable behind a Keras variable (or the variable itself)."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def is_float(variable) -> bool:
    """Whether a (Keras or TensorFlow) variable holds floats."""
    try:
        return tf.as_dtype(variable.dtype).is_floating
    except TypeError:
        return False


def _sync_on_read(variable) -> bool:
    return (isinstance(variable, tf.distribute.DistributedValues)
            and getattr(variable, "synchronization", None) == tf.VariableSynchronization.ON_READ)


@dataclasses.dataclass
class Held:
    """One held variable: the variable, its TensorFlow variable and its value before the step.

    `value` is what was read, or, for a small variable held stacked, the
    stack of the variables of its shape whose row `row` it is: the stack is
    a copy, so the step writes the variable in place; a value read and held
    as it is would make every write copy it.
    """

    variable: object
    tf_variable: object
    value: tf.Tensor
    checked: bool  # its value after the step must be finite
    row: int | None = None

    @property
    def before(self) -> tf.Tensor:
        """The value before the step (a slice of the stack, made where it is asked for: in the restore's branch)."""
        return self.value if self.row is None else self.value[self.row]


class Transaction:
    """The values a step may change, held before it changes them (built at trace time)."""

    def __init__(self):
        self._held: dict[int, Held] = {}

    def __len__(self) -> int:
        return len(self._held)

    @property
    def held(self) -> list[Held]:
        """Every held variable, in the order it was first held."""
        return list(self._held.values())

    def hold(self, variables, checked: bool = True, stack: bool = False) -> None:
        """Reads each variable's value now, unless it is already held (the first value wins).

        Args:
            variables: Keras or TensorFlow variables.
            checked: whether the value after the step must be finite (floats
                only; metric states are restored but not checked). Defaults to `True`.
            stack: hold the small ones of each shape and dtype as one stack, a
                copy taken now (in a graph, without a strategy), so the step
                writes them in place; for state that will be restored. A held
                read costs no copy when the value is never used (a gated
                update's). Defaults to `False`.
        """
        fresh = {}
        for variable in variables:
            tf_var = tf_variable(variable)
            if id(tf_var) not in self._held:
                fresh.setdefault(id(tf_var), (variable, tf_var))
        stackable = stack and not tf.executing_eagerly() and not tf.distribute.has_strategy()
        members = list(fresh.values())
        made = {}
        if stackable:
            for group in stack_groups([(tf_var.shape, tf_var.dtype) for _, tf_var in members]):
                if len(group) > 1:  # one stack: a copy, made before the step writes
                    packed = tf.stack([tf.convert_to_tensor(members[i][1]) for i in group])
                    for row, i in enumerate(group):
                        variable, tf_var = members[i]
                        made[id(tf_var)] = Held(variable, tf_var, packed, checked and is_float(variable), row)
        for key, (variable, tf_var) in fresh.items():
            if key not in made:  # one read: TensorFlow copies the buffer only if the step then writes it in place
                made[key] = Held(variable, tf_var, tf.convert_to_tensor(tf_var), checked and is_float(variable))
            self._held[key] = made[key]

    def holds(self, variable) -> bool:
        """Whether `variable` is held (asking makes no op, where `before` may slice a stack)."""
        return id(tf_variable(variable)) in self._held

    def before(self, variable) -> tf.Tensor | None:
        """The held value of `variable` before the step, or `None` if not held."""
        held = self._held.get(id(tf_variable(variable)))
        return held.before if held is not None else None

    def stacked_before(self, variables) -> tf.Tensor | None:
        """The values before the step of `variables` as one stack `[k, ...]`, if they were held in one; else `None`.

        The stack itself, or one gather of its rows: no slice and restack per variable.
        """
        held = [self._held.get(id(tf_variable(v))) for v in variables]
        if not held or any(h is None or h.row is None or h.value is not held[0].value for h in held):
            return None
        return take_rows(held[0].value, [h.row for h in held])

    def copies_of(self, variables) -> list[tf.Tensor]:
        """The stacks (copies) holding any of `variables`, each once: what a write of them waits for.

        A held read is consumed by its stack's `Pack`; a write scheduled
        before that `Pack` ran would find the buffer shared and copy it
        first. Writes that wait for the stacks are made in place.
        """
        copies = {}
        for variable in variables:
            held = self._held.get(id(tf_variable(variable)))
            if held is not None and held.row is not None:
                copies.setdefault(id(held.value), held.value)
        return list(copies.values())

    def checked(self) -> list[Held]:
        """The held float variables whose value after the step must be finite."""
        return [h for h in self._held.values() if h.checked]

    def all_finite(self) -> tf.Tensor:
        """Whether every checked variable is finite now (a scalar bool)."""
        flags = [tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(h.tf_variable)))
                 for h in self.checked()]
        return tf.reduce_all(tf.stack(flags)) if flags else tf.constant(True)

    def restore_if(self, reject: tf.Tensor, skip: frozenset = frozenset()) -> None:
        """Assigns every held value back when `reject` holds, in any replica context.

        `reject` must be the same on every replica (all-reduce the flags first).
        Executed eagerly (a replay), the values are assigned at once when
        `reject` holds.

        Args:
            reject: a scalar bool tensor.
            skip: ids of TensorFlow variables not to restore: a gated update
                wrote them only where the step was accepted
                (`tfguard._firewall.gate`). Their held value is then never
                used, so it costs no copy. Defaults to none.
        """
        restored = [h for key, h in self._held.items() if key not in skip]
        if tf.executing_eagerly() and tf.distribute.get_replica_context() is not None \
                and not tf.distribute.has_strategy():
            if bool(reject):
                for h in restored:
                    h.tf_variable.assign(h.before)
            return
        local = [h for h in restored if _sync_on_read(h.tf_variable)]
        shared = [h for h in restored if not _sync_on_read(h.tf_variable)]
        if local:
            def restore_local():
                for h in local:
                    h.tf_variable.assign(h.before)
                return tf.constant(True)

            keep_cond_functional(tf.cond(reject, restore_local, lambda: tf.constant(False)))
        if not shared:
            return
        variables = [h.tf_variable for h in shared]
        strategy_wide = tf.distribute.has_strategy()

        def restore_shared(distribution, reject, values):
            if isinstance(reject, tf.distribute.DistributedValues):
                reject = distribution.experimental_local_results(reject)[0]

            def restore():
                if not strategy_wide:  # the default strategy: the same assignment, without its wrapping;
                    for h in shared:  # a stacked value is sliced here, on the rare step that restores
                        h.tf_variable.assign(h.before, read_value=False)
                for variable, value in zip(variables, values or ()):
                    distribution.extended.update(variable, _assign, args=(value,), group=False)
                return tf.constant(True)

            keep_cond_functional(tf.cond(reject, restore, lambda: tf.constant(False)))

        if not strategy_wide:
            restore_shared(tf.distribute.get_strategy(), reject, None)
            return
        tf_compat.merge_call(restore_shared, tf.distribute.get_strategy(), reject, [h.before for h in shared])


def _assign(variable, value):
    return variable.assign(value)


__all__ = ["Held", "Transaction", "is_float", "tf_variable"]
