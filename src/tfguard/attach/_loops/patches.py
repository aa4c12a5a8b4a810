"""Keras `Loss` and `Metric` objects seen while an attach session is open: the one place they are patched.

A hand-written loop computes its loss with a `keras.losses.Loss` object
(`loss_fn(y, logits)`) and its metrics with `keras.metrics.Metric` objects
(`accuracy.update_state(y, logits)`); `train_on_batch` runs the model's
compiled ones. While `observing(observer)` is open, each outermost such call
made in loop code (outside any `fit` step, or in a `guard_step`'s step:
`hooks.context.in_loop_code`) is handed to the observer after it ran:
`observer.loss(loss, y_true, value)` and `observer.metric(metric)`. A call
inside another (a `CompileLoss` calling its losses, `MeanMetricWrapper`
calling `Mean`, a metric computing a loss) is part of the outer one.

What is wrapped, installed on entry and removed on exit, in this order:

1. `keras.losses.Loss.__call__`, and the `__call__` of every loss class
   that defines its own (Keras's `CompileLoss`);
2. the `update_state` of every `keras.metrics.Metric` class that defines
   one: `Metric.update_state` is abstract and every metric overrides it,
   so the wrapper goes on each class that has its own (Keras's and any
   imported so far);
3. `__init_subclass__` of `Loss` and `Metric`, so a class the script
   defines while the session is open gets its wrapper too.

Exit puts back every original, on every class it wrapped, last first. The
observer's own errors never reach the script: they are kept in
`ObservedCalls.errors`.

Example:

>>> import keras, numpy as np
>>> class Seen:
...     def __init__(self): self.calls = []
...     def loss(self, loss, y_true, value): self.calls.append(loss.name)
...     def metric(self, metric): self.calls.append(metric.name)
>>> seen = Seen()
>>> with observing(seen):
...     _ = keras.losses.MeanSquaredError()(np.ones(2), np.zeros(2))
...     keras.metrics.Mean(name="m").update_state(1.0)
>>> seen.calls, "_tfguard_observed" in vars(keras.metrics.Mean.update_state)
(['mean_squared_error', 'm'], False)
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator

import keras

from tfguard import _seam
from tfguard._hooks.context import in_loop_code

_MARK = "_tfguard_observed"


class ObservedCalls:
    """The wrappers of one `observing` block: what it wrapped, and how deep the current call is."""

    def __init__(self, observer):
        self.observer = observer
        self.errors: list[str] = []
        self._wrapped: list[tuple[type, str, object]] = []  # (class, attribute, what it was given)
        self._local = threading.local()

    # -- installing ---------------------------------------------------------------
    def install(self) -> None:
        for cls in _classes(keras.losses.Loss):
            self._wrap(cls, "__call__", self._loss_call)
        for cls in _classes(keras.metrics.Metric):
            self._wrap(cls, "update_state", self._metric_update)
        self._hook_subclasses(keras.losses.Loss, "__call__", self._loss_call)
        self._hook_subclasses(keras.metrics.Metric, "update_state", self._metric_update)

    def remove(self) -> None:
        for cls, name, value in reversed(self._wrapped):
            _seam.restore(cls, name, value)
        self._wrapped = []

    def _wrap(self, cls: type, name: str, make) -> None:
        original = cls.__dict__.get(name)
        if original is None or getattr(original, _MARK, False):
            return
        wrapper = make(original)
        setattr(wrapper, _MARK, True)
        self._wrapped.append((cls, name, wrapper))
        _seam.replace(cls, name, wrapper)

    def _hook_subclasses(self, base: type, name: str, make) -> None:
        held = base.__dict__.get("__init_subclass__")
        calls = self

        def init_subclass(cls, **kwargs):
            if held is not None:
                held.__get__(None, cls)(**kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)
            calls._wrap(cls, name, make)

        hook = classmethod(init_subclass)
        self._wrapped.append((base, "__init_subclass__", hook))
        _seam.replace(base, "__init_subclass__", hook)

    # -- the wrappers ----------------------------------------------------------------
    @contextlib.contextmanager
    def _call(self) -> Iterator[bool]:
        """Yields whether this call is the outermost one (in this thread)."""
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        try:
            yield depth == 0
        finally:
            self._local.depth = depth

    def _loss_call(self, original):
        calls = self

        @functools.wraps(original)
        def __call__(loss, *args, **kwargs):
            with calls._call() as outermost:
                value = original(loss, *args, **kwargs)
            if outermost and in_loop_code():
                y_true = args[0] if args else kwargs.get("y_true")
                calls._tell(calls.observer.loss, loss, y_true, value)
            return value

        return __call__

    def _metric_update(self, original):
        calls = self

        @functools.wraps(original)
        def update_state(metric, *args, **kwargs):
            with calls._call() as outermost:
                result = original(metric, *args, **kwargs)
            if outermost and in_loop_code():
                calls._tell(calls.observer.metric, metric)
            return result

        return update_state

    def _tell(self, fn, *args) -> None:
        try:
            fn(*args)
        except Exception as error:  # what tfguard sees never costs the script its run
            if len(self.errors) < 5:
                self.errors.append(f"{type(error).__name__}: {error}")


def _classes(base: type) -> list[type]:
    """`base` and every subclass of it defined so far, each once."""
    found, todo = [], [base]
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.append(cls)
            todo.extend(cls.__subclasses__())
    return found


@contextlib.contextmanager
def observing(observer) -> Iterator[ObservedCalls]:
    """Hands the loop's outermost `Loss` calls and `Metric` updates to `observer` while open (see the module)."""
    calls = ObservedCalls(observer)
    calls.install()
    try:
        yield calls
    finally:
        calls.remove()


__all__ = ["ObservedCalls", "observing"]
