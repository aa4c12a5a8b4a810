"""What a guarded step sees while it is traced: the places where it changes state.

The firewall wraps whatever step a model runs, so it cannot read the loss or
the gradients off its own code. It watches the two doors every Keras step
goes through instead:

* **the optimizer's `apply`** (every `apply_gradients` ends there, in
  Keras's `train_step`, a GAN's two optimizers or a hand-written loop): the
  gradients and variables of each update are recorded, the state the update
  will change is held by the step's `Transaction` first, and the update
  runs unchanged;
* **the model's `compute_loss`** (Keras's `train_step` and most custom steps
  call it): the loss and the predictions are recorded.

`keras.optimizers.Optimizer.apply` is wrapped once per process (on first use
of the firewall); outside a guarded step, and for an optimizer no guard
covers, the wrapper calls the original and adds no op. A
`LossScaleOptimizer`'s own `apply` is wrapped too, so its (scaled)
gradients are seen where they are, and the inner optimizer's apply, which
runs inside the loss scale's `cond`, is left alone.

Example:

>>> import keras, numpy as np, tensorflow as tf
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> context = StepContext(model)
>>> with context.active():
...     logs = model.train_step((tf.ones((4, 2)), tf.ones((4, 1))))
>>> [len(update.gradients) for update in context.updates], context.losses[0].loss.shape
([2], TensorShape([]))
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator

import keras
import tensorflow as tf

from tfguard.hooks import dry_run, keras_compat
from tfguard.hooks.transaction import Transaction, is_float, tf_variable
from tfguard.hooks.weights_before import Copied, copy_before

_LOCAL = threading.local()
_INSTALLED: dict[type, tuple[Callable, bool]] = {}
_MARK = "_tfguard_wrapped"
ORIGINAL_STEP = "_tfguard_original_step"
"""The attribute of a step tfguard wrapped that holds the model's own step."""


@dataclasses.dataclass
class Update:
    """One optimizer update seen in a step.

    Args:
        optimizer: the optimizer that applied it.
        gradients: the gradients as passed (a `LossScaleOptimizer`'s are scaled).
        variables: the variables they update.
        scale: the loss scale the gradients carry (`None` when unscaled).
    """

    optimizer: object
    gradients: list
    variables: list
    scale: object = None
    state_bytes: int = 0  # of its variables and its optimizer's
    small: bool = True  # its state is at most the step's `hold_bytes`: its door may hold the gradients
    written: frozenset = frozenset()  # tf variable ids a gated update writes (checked before writing)
    gradient_flags: dict = dataclasses.field(default_factory=dict)  # id(gradient) -> its flag, taken at the door
    _dense: list | None = dataclasses.field(default=None, repr=False)

    def dense_gradients(self) -> list:
        """The gradients as dense tensors, converted once (the same tensor for every check)."""
        if self._dense is None:
            self._dense = [None if g is None else tf.convert_to_tensor(g) for g in self.gradients]
        return self._dense

    def unscaled(self) -> list:
        """The gradients divided by the loss scale (what the weights really see)."""
        if self.scale is None:
            return self.dense_gradients()
        return [None if g is None else g / tf.cast(self.scale, g.dtype) for g in self.dense_gradients()]


@dataclasses.dataclass
class LossSeen:
    """One `compute_loss` call seen in a step: the loss and what it was computed from."""

    loss: tf.Tensor
    y_pred: object
    y: object


class StepContext:
    """The trace-time record of one guarded step (Python objects, built once per trace).

    Args:
        model: the model whose step is traced (`None` for a bare step function).
        transaction: where state is held before it changes. Defaults to a new one.
    """

    def __init__(self, model: keras.Model, transaction: Transaction | None = None):
        self.model = model
        self.transaction = transaction if transaction is not None else Transaction()
        self.updates: list[Update] = []
        self.losses: list[LossSeen] = []
        self.graph = None
        self.nested_updates = 0  # updates inside the step's own control flow (not checkable)
        self.gate = None  # called with each update: the flag its apply runs under, or None to hold it
        self.record_flag = None  # set when listeners want weight norms and update ratios
        self.weight_stats: dict = {}  # tf variable id -> ([k, 3] squared norms before/change/after, row)
        self.restores = False  # whether a rejected step is rolled back (a guard): held values are copies anyway
        self.hold_bytes = None  # set by the step: an update with more state is never held for its statistics
        self._pending = None  # what the next apply must wait for
        self._across = None  # the variables whose weight table the next apply's end takes, and their values before
        self.copies: list[Copied] = []  # weights of small updates copied at the door on recording steps
        self.door_hooks: list[Callable] = []  # hook(update) -> a tensor the update's apply waits for, or None
        self.gradient_buckets: dict = {}  # variable id -> its gradient's histogram, bucketed at the door
        self.gradient_stats: dict = {}  # variable id -> (table, row): squared norm, zeros, size, at the door

    @contextlib.contextmanager
    def active(self) -> Iterator[StepContext]:
        """Makes this the current step of this thread; wraps `apply` and `compute_loss`."""
        install()
        self.graph = tf.compat.v1.get_default_graph() if not tf.executing_eagerly() else None
        stack = _stack()
        stack.append(self)
        if self.model is not None:
            watch_loss(self.model)
        try:
            yield self
        finally:
            stack.pop()

    def in_step_graph(self) -> bool:
        """Whether ops built now land in the step's own graph (not a `cond`/loop branch)."""
        if self.graph is None:
            return tf.executing_eagerly()
        return tf.compat.v1.get_default_graph() is self.graph

    # -- called by the wrapped doors -------------------------------------------------
    def before_update(self, optimizer, gradients, variables, scale=None):
        """Holds what the update will change, and records it (in the step's own graph only).

        Returns the flag the update's `apply` must run under when the step's
        `gate` takes it (`tfguard.firewall.gate`), else `None`.
        """
        if not self.in_step_graph():
            self.nested_updates += 1
            return None
        variables = list(variables) if variables is not None else keras_compat.optimizer_variables(optimizer)
        if not optimizer.built:
            optimizer.build(variables)
        if self.restores:  # held for a rollback; a step that does not restore holds nothing
            self.transaction.hold(variables)
            self.transaction.hold(optimizer.variables)
        size = dry_run.state_bytes([*variables, *optimizer.variables])
        update = Update(optimizer, list(gradients), variables, scale, state_bytes=size,
                        small=self.hold_bytes is None or size <= self.hold_bytes)
        self.updates.append(update)
        ok = self.gate(update) if self.gate is not None else None
        waits = [w for w in (hook(update) for hook in self.door_hooks) if w is not None]
        if ok is None and self.record_flag is not None and not self.restores:
            waits += self._before_for_statistics(update)
        if waits:
            if ok is not None:
                with tf.control_dependencies(waits):
                    ok = tf.identity(ok)
            else:
                self._pending = tf.group([*waits, *([self._pending] if self._pending is not None else [])])
        return ok

    def _before_for_statistics(self, update: Update) -> list:
        """Takes the weights of an update that is not held as they are before it, for their statistics.

        A small update's are copied at the door on recording steps only
        (`weights_before.copy_before`); a large one's table is taken right
        after its write, each value before dying with its row
        (`dry_run.weight_table_across`); a large loss-scaled one, whose
        write is inside the loss scale's `cond`, or one run eagerly, is held.
        Returns what the apply must wait for.
        """
        if update.small:  # every weight passed, a gradient or not: an update ratio of 0 says it does not train
            copied = copy_before([v for v in update.variables if is_float(v)], self.record_flag)
            self.copies.append(copied)
            return [copied.packed]
        weights = [v for g, v in zip(update.gradients, update.variables) if g is not None and is_float(v)]
        if update.scale is None and not tf.executing_eagerly():
            self._across = (weights, [tf.convert_to_tensor(tf_variable(v)) for v in weights])
        else:
            self.transaction.hold(weights)
        return []

    def has_before(self, variable) -> bool:
        """Whether the step took `variable`'s value before its update (held, or copied at the door)."""
        return self.transaction.holds(variable) or any(c.holds(variable) for c in self.copies)

    def before(self, variable) -> tf.Tensor:
        """`variable`'s value before the step's update; a copied one only inside the recording branch.

        A copy is taken at the first update's door; a variable held by a
        step that does not restore was held at a later (large, loss-scaled)
        update's, possibly after the first wrote it: the copy comes first.
        """
        for copied in self.copies:
            if copied.holds(variable):
                return copied.value(variable)
        return self.transaction.before(variable)

    def run_update(self, apply: Callable[[], object]):
        """Runs an update that is not gated, after what it must wait for (then its weight table, if due)."""
        pending, self._pending = self._pending, None
        if pending is None:
            result = apply()
        else:
            with tf.control_dependencies([pending]):
                result = apply()
        across, self._across = self._across, None
        if across:
            across, befores = across
            table = dry_run.weight_table_across(across, befores, self.record_flag)
            for row, variable in enumerate(across):
                self.weight_stats[id(tf_variable(variable))] = (table, row)
        return result

    def gated_apply(self, ok: tf.Tensor, apply: Callable[[], object]) -> None:
        """Runs `apply()` only where `ok` holds (a `tf.cond`: nothing is written otherwise)."""
        def run():
            apply()
            return tf.constant(True)

        tf.cond(ok, run, lambda: tf.constant(False))
        if self.gate is not None:
            self.gate.applied()

    @property
    def step_optimizer(self):
        """The optimizer whose `iterations` count the steps: the model's, if it applied, else the first."""
        applied = [u.optimizer for u in self.updates]
        own = getattr(self.model, "optimizer", None)
        for candidate in (own, getattr(own, "inner_optimizer", None)):
            if candidate is not None and any(a is candidate for a in applied):
                return own
        return applied[0] if applied else None


def _stack() -> list:
    if not hasattr(_LOCAL, "stack"):
        _LOCAL.stack = []
    return _LOCAL.stack


def current() -> StepContext | None:
    """The guarded step being traced (or run eagerly) in this thread, if any."""
    stack = _stack()
    return stack[-1] if stack else None


def watch_loss(model) -> None:
    """Wraps the model's `compute_loss` (once, on the instance) to record what the current step computes.

    The wrapper looks the step up in this thread (replicas trace in threads
    of their own) and records only for a step of this very model; otherwise
    it is the model's own `compute_loss`.
    """
    if not hasattr(model, "compute_loss") or getattr(model.compute_loss, _MARK, None) is not None:
        return
    original = model.compute_loss

    @functools.wraps(original)
    def compute_loss(*args, **kwargs):
        loss = original(*args, **kwargs)
        context = current()
        if context is not None and context.model is model and context.in_step_graph() \
                and isinstance(loss, tf.Tensor):
            names = ("x", "y", "y_pred", "sample_weight")
            bound = dict(zip(names, args))
            bound.update({k: v for k, v in kwargs.items() if k in names})
            context.losses.append(LossSeen(loss, bound.get("y_pred"), bound.get("y")))
        return loss

    setattr(compute_loss, _MARK, original)
    object.__setattr__(model, "compute_loss", compute_loss)


def unwatch_loss(model) -> None:
    """Removes the `compute_loss` wrapper of `watch_loss`."""
    wrapped = vars(model).get("compute_loss")
    original = getattr(wrapped, _MARK, None)
    if original is None:
        return
    if getattr(original, "__self__", None) is model and getattr(original, "__func__", None) is getattr(
            type(model), "compute_loss", None):
        object.__delattr__(model, "compute_loss")
    else:
        object.__setattr__(model, "compute_loss", original)


# -- the optimizer's door ----------------------------------------------------------------
_OUTSIDE: list[Callable] = []  # gates for updates outside any guarded step (hand-written loops)


def add_outside_gate(gate: Callable) -> None:
    """Routes updates made outside a guarded step through `gate(optimizer, grads, vars, apply)`."""
    install()
    if gate not in _OUTSIDE:
        _OUTSIDE.append(gate)


def remove_outside_gate(gate: Callable) -> None:
    if gate in _OUTSIDE:
        _OUTSIDE.remove(gate)


def _wrap_apply(original, scaled: bool):
    @functools.wraps(original)
    def apply(optimizer, grads, trainable_variables=None):
        context = current()
        if context is not None:
            grads = list(grads)
            scale = None
            if scaled:
                scale = tf.identity(tf.convert_to_tensor(optimizer.dynamic_scale)) if optimizer.built else None
            ok = None
            if not scaled or scale is not None:
                ok = context.before_update(optimizer, grads, trainable_variables, scale)
            if ok is None:
                return context.run_update(lambda: original(optimizer, grads, trainable_variables))
            return context.gated_apply(ok, lambda: original(optimizer, grads, trainable_variables))
        if _OUTSIDE and not getattr(_LOCAL, "gating", False):
            gate = _OUTSIDE[-1]
            _LOCAL.gating = True
            try:
                return gate(optimizer, list(grads), trainable_variables,
                            lambda g, v: original(optimizer, g, v))
            finally:
                _LOCAL.gating = False
        return original(optimizer, grads, trainable_variables)

    setattr(apply, _MARK, original)
    return apply


def install() -> None:
    """Wraps `apply` of Keras's optimizer class and of `LossScaleOptimizer` (once per process)."""
    for cls, scaled in ((keras_compat.OPTIMIZER_CLASS, False), (keras.optimizers.LossScaleOptimizer, True)):
        if cls in _INSTALLED:
            continue
        own = "apply" in cls.__dict__
        original = cls.__dict__["apply"] if own else cls.apply
        if getattr(original, _MARK, None) is not None:
            continue
        _INSTALLED[cls] = (original, own)
        cls.apply = _wrap_apply(original, scaled)


def uninstall() -> None:
    """Puts the original `apply` methods back (for tests)."""
    for cls, (original, own) in list(_INSTALLED.items()):
        if own:
            cls.apply = original
        else:
            del cls.apply
        _INSTALLED.pop(cls)


__all__ = ["ORIGINAL_STEP", "LossSeen", "StepContext", "Update", "add_outside_gate", "current", "install",
           "remove_outside_gate", "uninstall", "unwatch_loss", "watch_loss"]
