"""What a step sees while it is traced: the places where it changes state.

tfguard wraps whatever step a model runs, so it cannot read the loss or
the gradients off its own code. It intercepts the two calls every Keras
step makes instead:

* **the optimizer's `apply`** (every `apply_gradients` ends there, in
  Keras's `train_step`, a GAN's two optimizers or a hand-written loop): each
  update's gradients and variables are recorded, and the update goes
  through the active context's `intercept_apply`;
* **the model's `compute_loss`** (Keras's `train_step` and most custom steps
  call it): the loss and the predictions are recorded.

A `StepContext` records and lets the update run unchanged (the replay of a
quarantined batch uses it so); a context of its own kind overrides
`intercept_apply` (the firewall's `FirewallContext` holds, gates and takes its
gradient tables there). An update made outside any step goes through the
outside interceptors (`add_outside_interceptor`: a hand-written loop under `tfguard
run`), the one added last outermost: each hands the update on to the one
added before it (`tfguard run` adds the firewall's gate, then the loop
recorder, which sees each update before and after the gate wrote or
rejected it). An update made in a hand-written loop's step
(`StepContext.hand_written`: a step wrapped with `tfguard.guard_step`)
goes through the outside interceptors too, around the step's own interception.

`keras.optimizers.Optimizer.apply` is wrapped once per process (on first use
of a context or an outside interceptor), by one wrapper; outside an active context
and with no outside interceptor it calls the original and adds no op. A
`LossScaleOptimizer`'s own `apply` is wrapped too, so its (scaled)
gradients are seen where they are; the inner optimizer's apply, which runs
inside the loss scale's `cond`, is part of the update intercepted, and
passes straight through (it is no nested update of the step's own control
flow).

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

from tfguard import _seam
from tfguard._hooks import keras_compat
from tfguard._hooks.transaction import Transaction

_LOCAL = threading.local()
_INSTALLED: dict[type, Callable] = {}  # each class wrapped, and its wrapper
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
    # set by the firewall's apply interception (`tfguard._firewall.apply_interception`):
    state_bytes: int = 0  # of its variables and its optimizer's
    small: bool = True  # its state is at most the step's `hold_bytes`: its interception may hold the gradients
    commits: bool = False  # gated, it writes its dry run's values (small, dense, few variables: `gate.commits`)
    written: frozenset = frozenset()  # tf variable ids a gated update writes (checked before writing)
    gradient_flags: dict = dataclasses.field(default_factory=dict)  # id(gradient) -> its flag, taken at the apply
    values: list | None = None  # `(variable, value)` a gated update writes, its dry run's (None: its own apply runs)
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
    """The trace-time record of one step (Python objects, built once per trace).

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

    hand_written = False
    """Whether this is a hand-written loop's step (`tfguard.guard_step`), not a model's `train_step`:
    the outside interceptors see its updates too, and `in_loop_code()` holds inside it."""

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

    def record_update(self, optimizer, gradients, variables, scale=None) -> Update | None:
        """Records an update made in the step's own graph (its optimizer built at the apply); `None` for a nested one."""
        if not self.in_step_graph():
            self.nested_updates += 1
            return None
        variables = list(variables) if variables is not None else keras_compat.optimizer_variables(optimizer)
        update = Update(optimizer, list(gradients), variables, scale)
        self.updates.append(update)
        return update

    def intercept_apply(self, optimizer, gradients, variables, scale, apply: Callable[[list], object]):
        """Intercepts one optimizer apply: records the update, then runs `apply(gradients)` unchanged.

        A context of its own may override it to work on the update before it
        is applied (the firewall's `FirewallContext` holds, gates and takes its
        gradient tables there).
        """
        self.record_update(optimizer, gradients, variables, scale)
        return apply(gradients)

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
    """The step context active in this thread (traced, or run eagerly), if any."""
    stack = _stack()
    return stack[-1] if stack else None


def in_loop_code() -> bool:
    """Whether code running now is a hand-written loop's (outside any step, or in a `hand_written` one), not a model's `train_step` in `fit`."""
    step = current()
    return step is None or step.hand_written


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
    _seam.replace(model, "compute_loss", compute_loss)


def unwatch_loss(model) -> None:
    """Removes the `compute_loss` wrapper of `watch_loss`."""
    wrapped = vars(model).get("compute_loss")
    if getattr(wrapped, _MARK, None) is not None:
        _seam.restore(model, "compute_loss", wrapped)


# -- the interception of the optimizer's apply ------------------------------------------
def apply_classes() -> tuple:
    """The Keras classes whose `apply` is intercepted: `(class, scaled)` (a `LossScaleOptimizer`'s gradients carry its scale)."""
    return (keras_compat.OPTIMIZER_CLASS, False), (keras.optimizers.LossScaleOptimizer, True)


@contextlib.contextmanager
def applying() -> Iterator[None]:
    """Marks an intercepted update being written: an optimizer's `apply` inside it is part of it."""
    _LOCAL.applying = True
    try:
        yield
    finally:
        _LOCAL.applying = False


def is_applying() -> bool:
    """Whether an intercepted update is being written now (in this thread)."""
    return getattr(_LOCAL, "applying", False)


@dataclasses.dataclass
class ApplyCall:
    """One intercepted call of an optimizer's `apply`, its arguments listed once.

    Args:
        gradients: the gradients, a list.
        variables: the variables, a list (`None`: the optimizer's own).
        scale: the loss scale the gradients carry (`None` when unscaled).
        unbuilt: a `LossScaleOptimizer` with nothing to build it with: its own apply fails as it would.
    """

    gradients: list
    variables: list | None
    scale: object = None
    unbuilt: bool = False


def read_apply_call(optimizer, grads, trainable_variables, scaled: bool) -> ApplyCall:
    """Lists an `apply` call's arguments once, builds its optimizer as Keras would, reads its loss scale.

    A generator of variables read by the interception would reach Keras
    empty; an unbuilt optimizer is built from the variables, so the
    interception sees its slots. The interception writes the update itself,
    with these arguments.
    """
    grads = list(grads)
    if trainable_variables is not None:
        trainable_variables = list(trainable_variables)
        if not optimizer.built:
            keras_compat.build_optimizer(optimizer, trainable_variables)
    if not scaled:
        return ApplyCall(grads, trainable_variables)
    if not optimizer.built:
        return ApplyCall(grads, trainable_variables, unbuilt=True)
    return ApplyCall(grads, trainable_variables, tf.identity(tf.convert_to_tensor(optimizer.dynamic_scale)))


_OUTSIDE: list = []
"""Interceptors of the updates made outside any step (objects with `intercept_apply`); the last one added is outermost."""


def add_outside_interceptor(interceptor) -> None:
    """Sends every optimizer update made outside any step through `interceptor.intercept_apply` (as a context's).

    The interceptors added before it see the update after it: `interceptor.intercept_apply`'s `apply` hands the
    update on to them (the innermost writes it).
    """
    install()
    if interceptor not in _OUTSIDE:
        _OUTSIDE.append(interceptor)


def remove_outside_interceptor(interceptor) -> None:
    if interceptor in _OUTSIDE:
        _OUTSIDE.remove(interceptor)


def _through_outside(interceptors: list, optimizer, variables, last: Callable[[list], object]) -> Callable[[list], object]:
    """`apply(gradients)` that passes the update through `interceptors` (the last one outermost), then `last`."""
    apply = last
    for interceptor in interceptors:
        apply = functools.partial(_pass, interceptor, optimizer, variables, apply)
    return apply


def _pass(interceptor, optimizer, variables, inner, gradients):
    return interceptor.intercept_apply(optimizer, gradients, variables, None, inner)


def _wrap_apply(original, scaled: bool):
    @functools.wraps(original)
    def apply(optimizer, grads, trainable_variables=None):
        step = current()
        interceptors = list(_OUTSIDE) if step is None or step.hand_written else []
        if (step is None and not interceptors) or is_applying():
            return original(optimizer, grads, trainable_variables)
        incoming = read_apply_call(optimizer, grads, trainable_variables, scaled and step is not None)

        def write(gradients):
            return original(optimizer, gradients, incoming.variables)

        def through(gradients):
            """The update, with any optimizer's apply inside it part of it (not an update of its own)."""
            with applying():
                return write(gradients)

        if incoming.unbuilt:
            return through(incoming.gradients)
        if step is None:
            return _through_outside(interceptors, optimizer, incoming.variables, through)(incoming.gradients)

        # A LossScaleOptimizer's inner update (its variables are the loss scale's) is part of it; another
        # optimizer's apply inside one (a wrapper of the user's) is an update of its own, seen at the apply.
        def in_step(gradients):
            return step.intercept_apply(optimizer, gradients, incoming.variables, incoming.scale,
                                     through if scaled else write)

        return _through_outside(interceptors, optimizer, incoming.variables, in_step)(incoming.gradients)

    setattr(apply, _MARK, original)
    return apply


def install() -> None:
    """Wraps `apply` of Keras's optimizer class and of `LossScaleOptimizer` (once per process)."""
    for cls, scaled in apply_classes():
        if cls in _INSTALLED:
            continue
        own = "apply" in cls.__dict__
        original = cls.__dict__["apply"] if own else cls.apply
        if getattr(original, _MARK, None) is not None:
            continue
        wrapper = _wrap_apply(original, scaled)
        _INSTALLED[cls] = wrapper
        _seam.replace(cls, "apply", wrapper)


def uninstall() -> None:
    """Puts the original `apply` methods back (for tests); the next context or outside interceptor wraps them again."""
    for cls, wrapper in list(_INSTALLED.items()):
        _seam.restore(cls, "apply", wrapper)
        _INSTALLED.pop(cls)


__all__ = ["ORIGINAL_STEP", "ApplyCall", "LossSeen", "StepContext", "Update", "add_outside_interceptor", "apply_classes",
           "applying", "read_apply_call", "current", "in_loop_code", "install", "is_applying", "remove_outside_interceptor", "uninstall",
           "unwatch_loss", "watch_loss"]
