"""What the firewall does at the optimizer's apply: hold, gate, and take its gradient tables.

`tfguard._hooks.context.StepContext` records a step's updates and losses;
every optimizer update of the step goes through its `intercept_apply`. A
guarded or recording step runs inside a `FirewallContext`, whose interception, for
each update, before it is applied:

1. holds the state the update will change, when a rejected step is rolled
   back (a guard);
2. asks the step's `Gate` whether to check a large update before it is
   written, and then writes it only under that decision
   (`tfguard._firewall.gate`);
3. on recording steps, takes the gradients' norms (`gradient_table`) and
   histograms (`gradient_buckets`), each in one cond (`gradient_cond`), so the
   gradients die with the update, and, for a step that holds nothing, what
   weight norms and update ratios need of the weights before it: a small
   update's copied at the apply (`weights_before.copy_before`), a large
   one's squared norms taken right after its write
   (`dry_run.weight_table_across`).

The hooks' one wrapper of the optimizers' `apply` calls the active
context's `intercept_apply`: this context's is the firewall's apply interception.

Example:

>>> import keras, tensorflow as tf
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> context = FirewallContext(model, restores=True)
>>> with context.active():
...     _ = model.train_step((tf.ones((4, 2)), tf.ones((4, 1))))
>>> len(context.updates), context.has_before(model.trainable_variables[0])
(1, True)
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import tensorflow as tf

from tfguard._firewall.config import HOLD_BYTES
from tfguard._firewall.gate import commits
from tfguard._hooks import dry_run
from tfguard._hooks.context import StepContext, Update
from tfguard._hooks.functional_cond import keep_cond_functional
from tfguard._hooks.transaction import is_float, tf_variable
from tfguard._hooks.weights_before import Copied, copy_before
from tfguard._signals import stats
from tfguard._signals.histograms import HIST_BUCKETS, Bucketed, histograms_of


class FirewallContext(StepContext):
    """The trace-time record of one guarded or recording step, with the firewall at its optimizer's apply.

    Args:
        model: the model whose step is traced (`None` for a bare step function).
        restores: whether a rejected step is rolled back (a guard): everything a step of
            `model` may change is held now (`hold_state`), and what each update changes at
            its apply. Defaults to `False`.
        hold_bytes: an update with more state is not held for its statistics, and its gradient
            conds are lowered (`Update.small`); a model with more state is held unstacked
            (`hold_state`). Defaults to `None` (every update is small; `HOLD_BYTES` for the model).
        record_flag: the bool variable that says a step records its signals: its interception takes
            the gradients' norms then. Defaults to `None` (not a recording trace).
        weights: whether the recording steps take weight norms and update ratios. Defaults to `False`.
        histogram_flag: the bool variable that says a step takes histograms: its interception buckets
            the gradients then. Defaults to `None` (no gradient histograms).
    """

    def __init__(self, model: keras.Model, *, restores: bool = False, hold_bytes: int | None = None,
                 record_flag=None, weights: bool = False, histogram_flag=None):
        super().__init__(model)
        self.restores = restores
        self.hold_bytes = hold_bytes
        self.record_flag = record_flag
        self.weights = weights and record_flag is not None
        self.histogram_flag = histogram_flag
        self.gate = None  # the step's `Gate`, when it checks large updates before they are written
        self.weight_stats: dict = {}  # tf variable id -> ([k, 3] squared norms before/change/after, row)
        self.copies: list[Copied] = []  # weights of small updates copied at the apply on recording steps
        self.gradient_buckets: dict = {}  # variable id -> its gradient's histogram, bucketed at the apply
        self.gradient_stats: dict = {}  # variable id -> (table, row): squared norm, zeros, size, at the apply
        self.stacks = False  # whether held state is copied into stacks (a model small enough to hold whole)
        if restores and model is not None:
            self.stacks = hold_state(model, self, HOLD_BYTES if hold_bytes is None else hold_bytes)

    def intercept_apply(self, optimizer, gradients, variables, scale, apply: Callable[[list], object]):
        """Holds, gates and takes the gradient tables of one update, then applies it (or not: a rejected gated one)."""
        update = self.record_update(optimizer, gradients, variables, scale)
        if update is None:  # inside the step's own control flow: checked through its state alone
            return apply(gradients)
        update.state_bytes = dry_run.state_bytes([*update.variables, *optimizer.variables])
        update.small = self.hold_bytes is None or update.state_bytes <= self.hold_bytes
        update.commits = commits(update)
        writes_values = update.commits and self.gate is not None and self.gate.eligible(update)
        waits = []
        if self.restores:
            state = [*update.variables, *optimizer.variables]
            if writes_values:  # held as read: used (and copied) only if a later check rejects the step
                self.transaction.hold(state)
            else:  # an optimizer built by this step (its first trace) holds its slots here, stacked like the rest;
                self.transaction.hold(state, stack=self.stacks)  # the writes wait for the copies: made in place
                waits += self.transaction.copies_of(state)
        if self.gate is not None and any(isinstance(g, tf.IndexedSlices) for g in gradients):
            gradients = zero_sparse_unless(self.gate.checks_hold(), gradients)
        ok = self.gate(update, gradients) if self.gate is not None else None
        waits += self._gradient_tables(update)
        if ok is not None:
            if waits:
                with tf.control_dependencies(waits):
                    ok = tf.identity(ok)
            if update.values is not None:  # its dry run's values, checked: written as they are
                return self._gated(ok, lambda: write(update.values))
            return self._gated(ok, lambda: apply(gradients))
        across = None
        if self.weights and not self.restores:
            copied, across = self._before_for_statistics(update)
            waits += copied
        if waits:
            with tf.control_dependencies([tf.group(waits)]):
                result = apply(gradients)
        else:
            result = apply(gradients)
        if across:
            weights, befores = across
            table = dry_run.weight_table_across(weights, befores, self.record_flag)
            for row, variable in enumerate(weights):
                self.weight_stats[id(tf_variable(variable))] = (table, row)
        return result

    def _gated(self, ok: tf.Tensor, apply: Callable[[], object]) -> None:
        """Runs `apply()` only where `ok` holds (a `tf.cond`: nothing is written otherwise)."""
        def run():
            apply()
            return tf.constant(True)

        tf.cond(ok, run, lambda: tf.constant(False))
        self.gate.applied()

    def _gradient_tables(self, update: Update) -> list:
        """On recording steps, the gradients' norms; on histogram steps, their buckets. Returns what the apply waits for."""
        waits = []
        if self.record_flag is not None:
            taken = gradient_table(update, self.record_flag)
            if taken is not None:
                table, variables = taken
                for row, variable in enumerate(variables):
                    self.gradient_stats.setdefault(id(variable), (table, row))
                waits.append(table)
        if self.histogram_flag is not None:
            taken = gradient_buckets(update, self.histogram_flag)
            if taken is not None:
                table, variables = taken
                for row, variable in enumerate(variables):
                    self.gradient_buckets.setdefault(id(variable), Bucketed(table, row))
                waits.append(table)
        return waits

    def _before_for_statistics(self, update: Update) -> tuple[list, tuple | None]:
        """Takes the weights of an update that is not held as they are before it, for their statistics.

        A small update's are copied at the apply on recording steps only
        (`weights_before.copy_before`); a large one's table is taken right
        after its write, each value before dying with its row
        (`dry_run.weight_table_across`); a large loss-scaled one, whose
        write is inside the loss scale's `cond`, or one run eagerly, is held.
        Returns what the apply must also wait for, and the weights whose
        table is taken after it with their values before.
        """
        if update.small:  # every weight passed, a gradient or not: an update ratio of 0 says it does not train
            copied = copy_before([v for v in update.variables if is_float(v)], self.record_flag)
            self.copies.append(copied)
            return copied.tensors, None
        weights = [v for g, v in zip(update.gradients, update.variables) if g is not None and is_float(v)]
        if update.scale is None and not tf.executing_eagerly():
            return [], (weights, [tf.convert_to_tensor(tf_variable(v)) for v in weights])
        self.transaction.hold(weights)
        return [], None

    def has_before(self, variable) -> bool:
        """Whether the step took `variable`'s value before its update (held, or copied at the apply)."""
        return self.transaction.holds(variable) or any(c.holds(variable) for c in self.copies)

    def before(self, variable) -> tf.Tensor:
        """`variable`'s value before the step's update; a copied one only inside the recording branch.

        A copy is taken at the first update's apply; a variable held by a
        step that does not restore was held at a later (large, loss-scaled)
        update's, possibly after the first wrote it: the copy comes first.
        """
        for copied in self.copies:
            if copied.holds(variable):
                return copied.value(variable)
        return self.transaction.before(variable)

    def stacked_before(self, variables) -> tf.Tensor | None:
        """The values of `variables` (of one shape) before the step's update as one stack `[k, ...]`, or `None`.

        Where the step holds or copied them as rows of one stack: the stack
        itself or one gather, not a slice per variable and a new stack.
        """
        for copied in self.copies:
            if copied.holds(variables[0]):
                return copied.stacked(variables)
        return self.transaction.stacked_before(variables)


def write(values: list) -> None:
    """Assigns each `(variable, value)`: a value no other op holds becomes the variable's buffer (no copy)."""
    for variable, value in values:
        tf_variable(variable).assign(value, read_value=False)


def hold_state(model: keras.Model, context: StepContext, hold_bytes: int = HOLD_BYTES) -> bool:
    """Holds everything a step of `model` may change, before it runs; returns whether it is held stacked.

    A model whose whole state is at most `hold_bytes` (no update of it is
    gated) holds its small variables stacked (`Transaction.hold(stack=True)`),
    each weight with its optimizer slots (one shape): each is then written
    in place. A larger one holds them as read, so a gated update's, which is
    never restored, costs no copy.
    """
    slots = dry_run.optimizer_slots(model)
    stack = dry_run.state_bytes([*model.variables, *slots]) <= hold_bytes  # `model_state_bytes`, its slots kept
    txn = context.transaction
    txn.hold([*model.variables, *slots], stack=stack)
    txn.hold(model.metrics_variables, checked=False, stack=stack)
    return stack


def zero_sparse_unless(ok, gradients: list) -> list:
    """`gradients` with each sparse one's values zeroed where `ok` is false; dense ones as they are.

    Keras's sparse updates (Adagrad, Adadelta, Adafactor, centered RMSprop
    on an `Embedding`'s `IndexedSlices`) fail the whole step on a NaN
    value, after writing part of it, where no rollback can run. An update
    of a step already rejected gets zeros instead: it is never written
    (gated) or rolled back (held), and it no longer fails.

    Example:

    >>> g = tf.IndexedSlices(tf.constant([[float("nan")]]), tf.constant([2]), tf.constant([4, 1]))
    >>> zero_sparse_unless(tf.constant(False), [g, tf.constant([1.0])])[0].values.numpy().tolist()
    [[0.0]]
    """
    def zeroed(gradient):
        if not isinstance(gradient, tf.IndexedSlices):
            return gradient
        values = tf.cond(ok, lambda: gradient.values, lambda: tf.zeros_like(gradient.values))
        return tf.IndexedSlices(values, gradient.indices, gradient.dense_shape)

    return [zeroed(g) for g in gradients]


def gradient_cond(update: Update, pred, true_fn, false_fn):
    """A cond at the optimizer's apply, on the update's gradients: kept functional (`keep_cond_functional`) for a small update, lowered for a large one.

    A lowered cond costs a `Switch` per gradient and a walk of its dead
    branch on every step that does not take it: on a 200-layer MLP most of
    what a step that records nothing costs more than a plain one. A
    functional `If` costs one op, but holds every gradient until all exist,
    which only a large update (`update.small` false: more state than the
    step may hold) pays for in memory.
    """
    out = tf.cond(pred, true_fn, false_fn)
    return keep_cond_functional(out) if update.small else out


def gradient_buckets(update: Update, flag) -> tuple[tf.Tensor, list] | None:
    """At the optimizer's apply, on histogram steps: `[k, HIST_BUCKETS, 3]` buckets of the update's gradients.

    Bucketed before the update is applied, so the gradients die with the
    update as in a step that records nothing, rather than living until the
    step's end. Returns the table and the `k` variables of its rows.
    """
    variables, grads = _gradients(update)
    if not grads:
        return None
    table = gradient_cond(update, tf.convert_to_tensor(flag), lambda: histograms_of(grads),
                      lambda: tf.zeros([len(grads), HIST_BUCKETS, 3]))
    return table, variables


def gradient_table(update: Update, flag) -> tuple[tf.Tensor, list] | None:
    """At the optimizer's apply, on recording steps: `[k, 3]` per gradient: its squared norm, its zeros, its size.

    Taken before the update is applied, so the gradients die with the
    update rather than living until the step's end. Returns the table and
    the `k` variables of its rows.
    """
    variables, grads = _gradients(update)
    if not grads:
        return None
    table = gradient_cond(update, tf.convert_to_tensor(flag), lambda: stats.gradient_rows(grads),
                      lambda: tf.zeros([len(grads), 3]))
    return table, variables


def _gradients(update: Update) -> tuple[list, list]:
    """The update's variables that have a gradient, and their gradients unscaled."""
    pairs = [(v, g) for v, g in zip(update.variables, update.unscaled()) if g is not None]
    return [v for v, _ in pairs], [g for _, g in pairs]


__all__ = ["FirewallContext", "gradient_cond", "gradient_buckets", "gradient_table", "hold_state",
           "zero_sparse_unless"]
