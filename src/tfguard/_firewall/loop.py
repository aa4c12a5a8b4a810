"""The firewall for hand-written training loops: guard the step function, or every optimizer.

`guard_step(step_fn, model)` is the one line for a loop that calls its own
step function (`tf.GradientTape` and `optimizer.apply_gradients`): each call
runs the function inside the same transaction as a guarded `fit` step, with
the data (every float argument), loss (what `compute_loss` returned, or the
float values the function returns), gradients (everything handed to an
optimizer) and update stages, the policy on the host, and the batch
quarantined with the model's weights. Its step is a hand-written loop's
(`StepContext.hand_written`): under `tfguard run` the loop recorder sees its
updates too, and its violations join the loop's run (`guarded_steps`).

`gate_optimizers()` is what `tfguard run` uses on a script whose loop it
cannot see: every Keras optimizer update anywhere in the process checks its
gradients and its result, and an update that would make a weight or an
optimizer variable non-finite is rolled back (its variables and the
optimizer's, bitwise). Rejections are counted in variables (they hold under
`tf.function` and XLA) and read back with `gate_counts()`.

Example:

>>> import keras, numpy as np, tensorflow as tf, tfguard
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> optimizer = keras.optimizers.SGD(0.1)
>>> @tf.function
... def train_step(x, y):
...     with tf.GradientTape() as tape:
...         loss = tf.reduce_mean((model(x) - y) ** 2)
...     grads = tape.gradient(loss, model.trainable_variables)
...     optimizer.apply_gradients(zip(grads, model.trainable_variables))
...     return loss
>>> step = tfguard.guard_step(train_step, model, policy="skip", quarantine_dir=None)
>>> x = np.ones((4, 2), "float32"); x[1, 0] = np.nan
>>> _ = step(tf.constant(x), tf.ones((4, 1)))
>>> [(e.stage, e.where, e.batch) for e in step.events]
[('data', 'argument 0', 0)]
>>> bool(np.isfinite(model.get_weights()[0]).all())
True
"""

from __future__ import annotations

import weakref

import keras
import tensorflow as tf

from tfguard._firewall import stages
from tfguard._firewall.apply_interception import FirewallContext, zero_sparse_unless
from tfguard._firewall.config import DEFAULT_QUARANTINE, GuardConfig
from tfguard._firewall.outcome import StepOutcome, step_outcome
from tfguard._firewall.policy import Counters, GuardEvent, PolicyEnforcer
from tfguard._firewall.spikes import TABLE, SpikeCheck, SpikeWindow, batch_rows
from tfguard._firewall.stages import Flag
from tfguard._firewall.step import Plan, decide
from tfguard._hooks import keras_compat
from tfguard._hooks.context import add_outside_interceptor, current, remove_outside_interceptor
from tfguard._hooks.transaction import Transaction
from tfguard._optimizer_state import model_step, step_counter
from tfguard.checks._contract import float_leaves


class GuardedStep(Counters):
    """A hand-written step function, guarded; call it as the function.

    Args:
        step_fn: the step function (a `tf.function` or plain Python).
        model: the model it trains, for its state and the quarantine. Defaults to `None`.
        config: a `GuardConfig` (`data` and `forward` do not apply). Defaults to
            `GuardConfig()`.
        jit_compile: compile the guarded step with XLA. Defaults to `None` (no).

    After each call, `last_outcome` is the call's `StepOutcome`
    (`tfguard._firewall.outcome`) and `events` lists the violations.
    """

    def __init__(self, step_fn, model: keras.Model | None = None, config: GuardConfig | None = None,
                 jit_compile: bool | None = None):
        self.step_fn = step_fn
        self.model = model
        self.guard = config or GuardConfig()
        self.contract = None
        self.events: list[GuardEvent] = []
        self.event_listeners: list = []
        Counters.__init__(self)
        self.batches = 0
        self.last_outcome: StepOutcome | None = None  # the last call's
        self.plan: Plan | None = None
        self.spike_window = SpikeWindow(self.guard.spikes) if self.guard.spikes is not None else None
        self.enforcer = PolicyEnforcer(self)
        self.original_step = None
        self._compiled = isinstance(step_fn, tf.types.experimental.GenericFunction)
        # a tf.function's Python body is traced into the guarded step's own graph, where
        # its updates and losses can be checked (a nested function's graph is out of reach)
        self._body = getattr(step_fn, "python_function", step_fn)
        self._function = (tf.function(self._guarded, jit_compile=jit_compile)
                          if self._compiled or jit_compile else self._guarded)
        _GUARDED_STEPS.add(self)

    def _guarded(self, *args, **kwargs):
        step_context = FirewallContext(self.model, restores=True, hold_bytes=self.guard.hold_bytes)
        step_context.hand_written = True
        named = {}
        for index, value in enumerate(args):
            for position, leaf in enumerate(float_leaves(value)):
                named[f"argument {index}" + (f"[{position}]" if position else "")] = leaf
        flags: list[Flag] = stages.finite_flags("data", named)
        with step_context.active():
            outputs = self._body(*args, **kwargs)
        if isinstance(outputs, dict) or step_context.losses:
            flags += stages.loss(step_context, outputs)
        else:  # the function returned its loss (or a few values): each float one must be finite
            leaves = float_leaves(outputs)
            flags += stages.finite_flags("loss", {
                "returned value" + (f" {i}" if len(leaves) > 1 else ""): t for i, t in enumerate(leaves)})
        flags += stages.gradients(step_context)
        spike_check = SpikeCheck(self.spike_window, batch_rows(args[:1])) if self.spike_window is not None else None
        if spike_check is not None:
            flags += spike_check.flags(step_context, returned=_returned_loss(outputs))
        flags += stages.update(step_context)
        extra = {}
        if flags:
            extra = decide(flags, self.guard.policy)
            reject = extra.pop("reject")
            step_context.transaction.restore_if(reject)
            if spike_check is not None and spike_check.table is not None:
                extra[TABLE] = spike_check.table
                spike_check.record(reject)
        optimizer = step_context.step_optimizer
        if optimizer is not None:
            extra["iterations"] = tf.identity(tf.convert_to_tensor(step_counter(optimizer)))
        self.plan = Plan(slots=[f.slot for f in flags],
                         finite_slots=[i for i, f in enumerate(flags) if f.tensor is not None],
                         data_results=[], scalar_keys=[], histogram_keys=[], kinds=frozenset(),
                         coverage=[], counts_steps=optimizer is not None)
        return outputs, extra

    def __call__(self, *args, **kwargs):
        outputs, extra = self._function(*args, **kwargs)
        outcome = step_outcome(extra, outputs, self.plan, step_before=self._step_before(extra),
                               position=(self.batches, None, None))
        self.batches += 1
        self.last_outcome = outcome
        if outcome.checked:
            self.enforcer.handle(outcome, self.plan, args[0] if len(args) == 1 else tuple(args[:3]))
        return outputs

    def _step_before(self, extra: dict) -> int:
        """The global step before the call: the optimizer's iterations less an applied update, or the
        applied calls counted so far (a step that updates no optimizer), from the model's step the first time."""
        if "iterations" in extra:
            return int(extra["iterations"]) - int(float(extra.get("applied", 1.0)) > 0)
        if self.last_outcome is not None:
            return self.last_outcome.step_after
        return model_step(self.model)

def _returned_loss(outputs) -> list:
    """The loss a hand-written step returned, for the spike stage: its `"loss"`, or its first float scalar."""
    if isinstance(outputs, dict):
        outputs = outputs.get("loss")
    scalars = [t for t in float_leaves(outputs) if t.shape.rank == 0]
    return scalars[:1]


def guard_step(step_fn, model: keras.Model | None = None, *, policy: str = "raise",
               quarantine_dir: str | None = DEFAULT_QUARANTINE, max_consecutive_skips: int = 10,
               max_quarantined: int = 5, localize: bool = False,
               jit_compile: bool | None = None, spikes=False) -> GuardedStep:
    """Guards the step function of a hand-written training loop, in one line.

    Example:

    >>> import tfguard
    >>> step = tfguard.guard_step(lambda x: x, policy="skip", quarantine_dir=None)
    >>> step.guard.policy
    'skip'

    Args:
        step_fn: the function one loop iteration calls (`tf.function` or Python).
        model: the model it trains: its variables are rolled back with the
            optimizer's on a rejected step, and saved with a quarantined
            batch. Defaults to `None` (only what the optimizers update).
        policy: `"raise"`, `"skip"` or `"warn"`. Defaults to `"raise"`.
        quarantine_dir: where bad batches go (needs `model`). Defaults to
            `"tfguard-quarantine"`.
        max_consecutive_skips: with `"skip"`, stop after this many in a row.
            Defaults to `10`.
        max_quarantined: keep at most this many batches. Defaults to `5`.
        localize: replay a quarantined batch through `model.train_step`
            (only meaningful when the model's own step is the loop's).
            Defaults to `False`.
        jit_compile: compile the guarded step with XLA. Defaults to `None`.
        spikes: also reject a step whose loss (what `compute_loss` returned,
            else the function's returned loss) or global gradient norm is a
            spike (`tfguard._firewall.spikes`): `True`, a `SpikeConfig` or a
            mapping of its fields. Defaults to `False`.

    Returns:
        A `GuardedStep`: call it as the function.
    """
    config = GuardConfig(policy=policy, forward="off", data=None,
                         quarantine_dir=quarantine_dir if model is not None else None,
                         max_consecutive_skips=max_consecutive_skips,
                         max_quarantined=max_quarantined, localize=localize, spikes=spikes)
    return GuardedStep(step_fn, model, config, jit_compile=jit_compile)


_GUARDED_STEPS: weakref.WeakSet = weakref.WeakSet()


def guarded_steps() -> list[GuardedStep]:
    """The `GuardedStep`s alive in this process (their `events` are the loops' violations)."""
    return list(_GUARDED_STEPS)


# -- every optimizer, for loops tfguard cannot see (tfguard run) -------------------------------
_COUNTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _counter(optimizer) -> tf.Variable:
    counter = _COUNTERS.get(optimizer)
    if counter is None:
        with tf.init_scope():
            counter = tf.Variable(0, dtype=tf.int64, trainable=False,
                                  name=f"tfguard_rejected_{optimizer.name}")
        _COUNTERS[optimizer] = counter
    return counter


class _OutsideInterceptor:
    """The interceptor of every optimizer update outside a guarded step (see `gate_optimizers`)."""

    def intercept_apply(self, optimizer, grads, variables, scale, apply):
        """The update, checked and rolled back by itself when it is bad (in a guarded step: that step's interception does)."""
        if current() is not None:  # a `guard_step`'s step: checked and rolled back as a whole
            return apply(grads)
        variables = list(variables) if variables is not None else keras_compat.optimizer_variables(optimizer)
        counter = _counter(optimizer)
        txn = Transaction()
        txn.hold(variables)
        txn.hold(optimizer.variables)
        scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        oks = [] if scaled else [tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(g)))
                                 for g in grads if g is not None]
        if oks and any(isinstance(g, tf.IndexedSlices) for g in grads):
            grads = zero_sparse_unless(tf.reduce_all(tf.stack(oks)), grads)
        result = apply(grads)
        oks.append(txn.all_finite())
        reject = tf.logical_not(tf.reduce_all(tf.stack(oks)))
        txn.restore_if(reject)
        counter.assign_add(tf.cast(reject, tf.int64))
        return result


_OUTSIDE_DOOR = _OutsideInterceptor()


def gate_optimizers() -> None:
    """Checks every Keras optimizer update made outside a guarded step, from now on."""
    add_outside_interceptor(_OUTSIDE_DOOR)


def ungate_optimizers() -> None:
    """Stops checking updates outside a guarded step."""
    remove_outside_interceptor(_OUTSIDE_DOOR)


def reset_gate_counts() -> None:
    """Forgets the counts (a new `tfguard run` session starts from zero)."""
    for counter in list(_COUNTERS.values()):
        counter.assign(0)


def rejected_updates(optimizer) -> int:
    """How many of `optimizer`'s updates the gate rejected (0 for one it never saw)."""
    counter = _COUNTERS.get(optimizer)
    return 0 if counter is None else int(counter.numpy())


def gate_counts() -> dict[str, int]:
    """Optimizer name -> how many of its updates were rejected (for optimizers still alive)."""
    return {optimizer.name: int(counter.numpy()) for optimizer, counter in list(_COUNTERS.items())}


__all__ = ["GuardedStep", "gate_counts", "gate_optimizers", "guard_step", "guarded_steps", "rejected_updates", "reset_gate_counts",
           "ungate_optimizers"]
