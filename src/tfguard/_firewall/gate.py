"""The optimizer's apply, gated: a large update is checked before it is written.

A guarded step holds the state it may change and puts it back when the step
is rejected (`tfguard._hooks.transaction`). For the weights and optimizer
slots an update writes, holding costs one more copy of all of them: a value
read before an in-place write makes TensorFlow write to a new buffer. At
the size of real models that doubles the memory of the weights and slots.

So an update whose state (its variables and its optimizer's variables) is
larger than `GuardConfig.hold_bytes` is not held. At the optimizer's apply
(LossScaleOptimizer's pattern) the gate:

1. computes what the update would write without writing it
   (`tfguard._hooks.dry_run`), each value reduced to a finiteness flag as
   soon as it exists, so what lives at once is one update's transients, as
   in the real apply;
2. decides from every flag of the step so far (data, forward, loss,
   gradients, the dry run, and the finiteness of the other state the
   forward pass left) under the policy;
3. runs the optimizer's own `apply` under `tf.cond` on that decision: a
   rejected update is never written, and nothing needs restoring.

An update small enough to hold (at most `hold_bytes` of state, dense
gradients, at most `COMMITTED_MOST` variables) is gated too, and its dry
run's values are what gets written (`commits`): the optimizer's math runs
once, and nothing is copied to roll it back (holding it made each in-place
write of a large variable copy it first: on the reference CNN, most of what
the guard cost). Its values live until the decision, as a held copy would,
and the writes are those of the optimizer's own apply, bitwise
(tests/firewall/test_gate.py).

The step's final decision is the gate's when no flag came after it and no
held variable was written after it (`Gate.covers`); the written state of
that last gated update is then left out of the restore. Otherwise
(a second optimizer after it, a loss read from the step's returned logs, a
write after the update) the transaction restores it as before: the
guarantee never depends on the shape of the step. Under a `tf.distribute`
strategy with several replicas, with an optimizer the dry run cannot follow
(`LossScaleOptimizer`, gradient accumulation), or for a hand-written loop,
the update is held as before.

Example:

>>> GateEntry(written=frozenset(), keys=frozenset(), ops=0).written
frozenset()
"""

from __future__ import annotations

import contextlib
import dataclasses

import tensorflow as tf

from tfguard._firewall import stages
from tfguard._firewall.stages import Flag, Slot, counted_flag, variable_path
from tfguard._hooks import dry_run, tf_compat
from tfguard._hooks.transaction import is_float, tf_variable
from tfguard._signals import stats

_READS = frozenset({"ReadVariableOp", "VariableShape", "ResourceGather", "ResourceGatherNd", "Identity",
                    "VarIsInitializedOp"})


COMMITTED_MOST = 256
"""The most variables (weights, slots, `iterations`) of an update whose dry-run values are written.

Each gets its own finiteness flag and its own write; an update of a deep
model's thousands of small variables is held in stacks instead, a few ops
for all of them.
"""


def commits(update) -> bool:
    """Whether `update` writes its dry run's values (`Gate`): state small enough to keep, dense gradients, few variables.

    Such an update is computed once, checked, and written only when the
    step's checks hold: nothing is copied to roll it back, and the
    optimizer's math runs once (a held update's in-place writes copy each
    large variable first; a gated one computes the update twice). Its
    values live until the decision, as a held copy would. A sparse
    gradient is written by the optimizer's own scatter (the order it adds
    repeated rows in is its own), so such an update applies as it is.
    """
    if not update.small or any(isinstance(g, tf.IndexedSlices) for g in update.gradients):
        return False
    return len({id(tf_variable(v)) for v in [*update.variables, *update.optimizer.variables]}) <= COMMITTED_MOST


def flag_key(flag: Flag) -> tuple:
    """What makes two flags the same check of the same tensor."""
    if flag.tensor is not None:
        return flag.slot, id(flag.tensor)
    return flag.slot, id(flag.ok if flag.judged_with is None else flag.judged_with[0])


def gate_ok(flags: list[Flag], policy: str, reducer: stats.Reducer) -> tf.Tensor:
    """Whether the step may write, from the flags so far (`warn`: only those that must reject)."""
    relevant = flags if policy != "warn" else [f for f in flags if f.slot.must_reject]
    parts = []
    finite = [f.tensor for f in relevant if f.tensor is not None]
    if finite:
        parts.append(reducer.all_finite(finite))
    others = [f for f in relevant if f.tensor is None]  # checks taken already (counted flags too)
    if others:
        parts.append(tf.reduce_all(stages.stacked_flags(others, "ok")))
    if not parts:
        return tf.constant(True)
    return parts[0] if len(parts) == 1 else tf.reduce_all(tf.stack(parts))


@dataclasses.dataclass(frozen=True)
class GateEntry:
    """The last gated update: what it writes (tf variable ids), the flag keys it decided on, the graph's op count after it."""

    written: frozenset
    keys: frozenset
    ops: int


def _next_run(steps, waits) -> list | None:
    """The dry run's next run, computed after `waits`; `None` after the last."""
    try:
        return steps.send(waits)
    except StopIteration:
        return None


class Gate:
    """Called by the apply interception for each update of one guarded step (trace time).

    Args:
        policy: the guard's policy.
        hold_bytes: updates whose state is at most this many bytes are held instead.
        flags_so_far: builds the step's flags as of now (`final=False`); with `state=False`,
            without the state's (read at the end).
        reducer: the step's shared reductions (one sum per tensor, shared with the final decision).
        weight_stats: where the step keeps, for listeners that want weight norms and
            update ratios, each gated weight's squared norms before, after and of its
            change, taken from the dry run on recording steps (nothing is held to
            compute them later). `None` when no listener wants them. Defaults to `None`.
        record_flag: the bool variable that says a step records its signals. Defaults to `None`.
    """

    def __init__(self, policy: str, hold_bytes: int, flags_so_far, reducer: stats.Reducer,
                 weight_stats: dict | None = None, record_flag=None):
        self.policy = policy
        self.hold_bytes = hold_bytes
        self.flags_so_far = flags_so_far
        self.reducer = reducer
        self.record_flag = record_flag
        self.weight_stats = weight_stats
        self.update_flags: dict[int, Flag] = {}  # tf variable id -> its dry-run flag
        self.state_reads: dict[int, tf.Tensor] = {}  # held variable id -> its value at the gate
        self.last: GateEntry | None = None
        self._graph = None
        self._touched: set | None = None
        self.pending: frozenset | set = frozenset()  # the state of the update being gated (not judged yet)
        self.commits = False  # the update being gated writes its dry run's values (they live to the decision)
        self._handles: dict = {}

    def eligible(self, update) -> bool:
        """Whether `update` is gated rather than held."""
        if tf.executing_eagerly() or update.scale is not None or not dry_run.supports(update.optimizer):
            return False
        strategy = tf.distribute.get_strategy()
        if tf.distribute.has_strategy() and strategy.num_replicas_in_sync > 1:
            return False
        return update.state_bytes > self.hold_bytes or update.commits

    def checks_hold(self) -> tf.Tensor:
        """Whether every check of the step so far holds (the state's left out), the same on every replica."""
        ok = gate_ok(self.flags_so_far(state=False), self.policy, self.reducer)
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return ok
        failed = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(tf.logical_not(ok), tf.float32))
        return tf.equal(failed, 0.0)

    def __call__(self, update, gradients: list) -> tf.Tensor | None:
        """The flag `apply` runs under, or `None` to hold this update instead.

        `gradients` are those the update is written with (the interception's,
        `update.gradients` with sparse ones zeroed on a rejected step).
        """
        if not self.eligible(update):
            return None
        trainable = {id(tf_variable(v)) for v in update.variables}
        tables = []
        self.commits = update.commits
        # Every other check first: the dry run starts once the step's own work is done and judged,
        # so its values do not share the memory with the backward pass.
        self.pending = {id(tf_variable(v)) for v in [*update.variables, *update.optimizer.variables]}
        before = gate_ok(self.flags_so_far(), self.policy, self.reducer)
        self.pending = frozenset()

        # judged now: the gradient may die with the update, not at the step's end
        pairs = [(v, g) for v, g in zip(update.variables, update.dense_gradients()) if g is not None]
        flags, _ = self._judge([Slot("gradients", f"gradient of '{variable_path(v)}'", "finite") for v, _ in pairs],
                               [g for _, g in pairs])
        for (_, grad), flag in zip(pairs, flags):
            update.gradient_flags[id(grad)] = flag

        committed = [] if self.commits else None

        def each(values):
            """One variable's dry run: its finiteness now (the values die here, or live to be written), its weight statistics on recording steps."""
            floats = [(variable, value) for variable, value in values if is_float(variable)]
            flags, done = self._judge(
                [Slot("update", f"update of '{variable_path(v)}'", "finite") for v, _ in floats],
                [value for _, value in floats])
            for (variable, _), flag in zip(floats, flags):
                self.update_flags[id(tf_variable(variable))] = flag
            if committed is not None:
                committed.extend(values)
            mine = [(v, value) for v, value in floats if id(tf_variable(v)) in trainable]
            if mine and self.weight_stats is not None:
                table = dry_run.weight_table(mine, self.record_flag)
                tables.append(table)
                for row, (variable, _) in enumerate(mine):
                    self.weight_stats[id(tf_variable(variable))] = (table, row)
                done.append(table)
            return tf.group(done) if done else None

        ids = set()
        # closed however the loop ends: a failing trace leaves no optimizer with the dry run's writes on it
        with contextlib.closing(dry_run.runs(update.optimizer, gradients, update.variables,
                                             after=before)) as steps:
            values = next(steps, None)
            while values is not None:  # each run reduced here before the next is computed
                ids.update(id(tf_variable(variable)) for variable, _ in values)
                values = _next_run(steps, each(values))
        update.written = frozenset(ids)
        update.values = committed
        flags = self.flags_so_far()
        ok = gate_ok(flags, self.policy, self.reducer)
        self.last = GateEntry(frozenset(ids), frozenset(flag_key(f) for f in flags), 0)
        if tables:  # taken before the apply writes: no value outlives the write
            with tf.control_dependencies(tables):
                ok = tf.identity(ok)
        return ok

    def _judge(self, slots: list[Slot], tensors: list) -> tuple[list[Flag], list]:
        """A finiteness flag per tensor, taken now; and what a run after them waits for.

        The update being committed: one `finite_ok` for all of them (a few
        ops on a good step, each counted exactly only when a sum is not
        finite), read back as vectors (`stages.judged_together`). Taken here,
        not at the step's end: a committed value still held by the end's
        count would be copied when it is written. Otherwise one sum each
        (`counted_flag`): the tensors die here, their counts not taken.
        """
        if not tensors:
            return [], []
        if self.commits:
            ok, counts = stages.finite_ok(tensors, counts=True, reducer=self.reducer)
            return stages.judged_together(slots, ok, counts), [ok, counts]
        flags = [counted_flag(slot, tensor, self.reducer) for slot, tensor in zip(slots, tensors)]
        return flags, [t for flag in flags for t in (flag.ok, flag.counts)]

    def applied(self) -> None:
        """Called once the gated `apply` is in the graph: later ops are 'after the gate'."""
        if self.last is not None:
            self._graph = tf.compat.v1.get_default_graph()
            self.last = dataclasses.replace(self.last, ops=len(self._graph.get_operations()))

    def state_value(self, held, final: bool) -> tf.Tensor:
        """The value of a held variable the update stage checks: read at the gate, reused at the end."""
        key = id(held.tf_variable)
        if final and key in self.state_reads and not self.written_after(held):
            return self.state_reads[key]
        value = tf.convert_to_tensor(held.tf_variable)
        if not final:
            self.state_reads[key] = value
        return value

    def written_after(self, held) -> bool:
        """Whether an op after the last gated update may write `held` (conservative: any non-read use)."""
        if self.last is None or self._graph is None:
            return True
        if self._touched is None:  # every resource an op after the gate uses other than to read it
            self._touched = {id(t) for op in self._graph.get_operations()[self.last.ops:]
                             if op.type not in _READS for t in op.inputs if t.dtype == tf.resource}
            self._handles = {id(external): internal for external, internal in tf_compat.captures(self._graph)}
        internal = self._handles.get(id(held.tf_variable.handle))
        return internal is not None and id(internal) in self._touched

    def covers(self, flags: list[Flag]) -> frozenset:
        """The tf variable ids the restore may leave out: the last gated update's, when its decision was final."""
        if self.last is None:
            return frozenset()
        if all(flag_key(f) in self.last.keys for f in flags):
            return self.last.written
        return frozenset()


__all__ = ["Gate", "GateEntry", "flag_key", "gate_ok"]
