"""`Intercept`: while open, every `keras.Model.compile` and `fit` passes through one remedy, and every fit is recorded.

A trial changes the run the way `tfguard run` attaches to it: from outside
the script, never by editing it. `Intercept` replaces `keras.Model.compile`
and `keras.Model.fit` at class level (as `AttachSession` replaces `fit`; open
the `Intercept` first, so the session's `fit` calls through it). Each
`compile` call goes to the remedy's `on_compile` hook, each `fit` call to its
`on_fit` hook, with the call's arguments as a dict the hook may change;
then the real method runs with them.

Every `fit` is recorded as a `FitCapture`: the model, the arguments the real
`fit` got (after the remedy), the per-epoch logs (from a callback, so a fit
that raises keeps the epochs it finished), and the exception, if any. The
models are numbered in the order they are first compiled (`ordinal`), so a
remedy aimed at "the second layer of the first model" of the original run
finds the same layer in a re-run, whose auto-generated layer names differ.

A hook that finds the remedy does not apply raises `NotApplicable`; the
call then runs unchanged and the reason is kept in `notes`. A hook records
each change it makes with `changed(text)` (the same text once).

Example:

>>> import keras, numpy as np
>>> with Intercept() as seen:
...     m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
...     m.compile(optimizer="sgd", loss="mse")
...     _ = m.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=2, verbose=0)
>>> len(seen.fits), len(seen.fits[0].epochs), "loss" in seen.fits[0].epochs[0]
(1, 2, True)
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Iterable

import keras

from tfguard import _seam
from tfguard._errors import ContractError
from tfguard.remedies._edits import NotApplicable


class EpochLog(keras.callbacks.Callback):
    """Keeps a copy of every epoch's logs (numbers only)."""

    def __init__(self, epochs: list):
        super().__init__()
        self.epochs = epochs

    def on_epoch_end(self, epoch, logs=None):
        row = {}
        for key, value in (logs or {}).items():
            try:
                row[key] = float(value)
            except (TypeError, ValueError):
                continue
        self.epochs.append(row)


@dataclasses.dataclass
class FitCapture:
    """One `fit` call as the real `fit` got it.

    Args:
        model: the model.
        ordinal: the model's 0-based position in compile order (fit order
            for a model never compiled in the `Intercept`).
        arguments: the arguments the real `fit` got, by name.
        epochs: one dict of numbers per finished epoch.
        error: `"<type>: <message>"` if `fit` raised, else `None`.
        kept_epoch: the index (within `epochs`) of the epoch whose weights the
            model kept, when that is not the last (an `EarlyStopping` that
            restored its best weights), else `None`.
        stopper: the `EarlyStopping` callback a remedy added, or `None`.
    """

    model: object
    ordinal: int
    arguments: dict
    epochs: list = dataclasses.field(default_factory=list)
    error: str | None = None
    kept_epoch: int | None = None
    stopper: object = None  # an EarlyStopping the remedy added, whose best epoch may be kept


class Intercept:
    """Passes every `compile` and `fit` through a remedy's hooks, and records every fit.

    Args:
        remedy: a `tfguard.remedies.Remedy`, or `None` to only record.
            Defaults to `None`.
        epochs_fraction: run each `fit` for this fraction of its `epochs`
            (at least one). Defaults to `1.0`.
        refuse: models (of an earlier run) that must not be compiled or fit
            again: a trial must start from fresh weights. Defaults to `()`.

    Raises:
        ContractError: when a refused model is compiled or fit.
    """

    def __init__(self, remedy=None, *, epochs_fraction: float = 1.0, refuse: Iterable = ()):
        if not 0 < float(epochs_fraction) <= 1:
            raise ValueError("Received an invalid value for `epochs_fraction`, expected a number "
                             f"in (0, 1]. Received: epochs_fraction={epochs_fraction!r}")
        self.remedy = remedy
        self._refused = {id(m) for m in refuse}
        self.epochs_fraction = float(epochs_fraction)
        self.fits: list[FitCapture] = []
        self.changes: list[str] = []
        self.notes: list[str] = []
        self.memo: dict = {}
        self.current: FitCapture | None = None  # the fit a hook is looking at
        self._order: list[int] = []
        self._models: list = []
        self._saved: dict = {}  # the wrappers in place, by attribute
        self._inside: set[int] = set()
        self._open = False

    # -- what hooks use ---------------------------------------------------------------------
    def changed(self, text: str) -> None:
        """Records one change made to the run (each text once)."""
        if text not in self.changes:
            self.changes.append(text)

    def once(self, *key) -> bool:
        """True the first time a key is seen (e.g. `("reinit", id(model))`), then False."""
        if key in self.memo:
            return False
        self.memo[key] = True
        return True

    def ordinal(self, model) -> int:
        """The model's position in compile order (registering it if new)."""
        if id(model) not in self._order:
            self._order.append(id(model))
            self._models.append(model)  # keeps the id unique while the trial lives
        return self._order.index(id(model))

    @property
    def models(self) -> list:
        """The models in compile order."""
        return list(self._models)

    # -- opening and closing ------------------------------------------------------------------
    def __enter__(self) -> Intercept:
        owner = keras.Model
        for name, hook in (("compile", self._compile), ("fit", self._fit)):
            original = getattr(owner, name)
            signature = inspect.signature(original)

            def wrapper(model, *args, __hook=hook, __original=original, __signature=signature,
                        **kwargs):
                return __hook(__original, __signature, model, args, kwargs)

            functools.update_wrapper(wrapper, original)
            self._saved[name] = wrapper
            _seam.replace(owner, name, wrapper)
        self._open = True
        return self

    def __exit__(self, *exc) -> None:
        for name, wrapper in self._saved.items():
            _seam.restore(keras.Model, name, wrapper)
        self._saved.clear()
        self._open = False

    # -- the calls ---------------------------------------------------------------------------
    def _bind(self, signature, model, args, kwargs):
        try:
            bound = signature.bind(model, *args, **kwargs)
        except TypeError:
            return None
        return bound

    def _hook(self, name: str, model, arguments: dict) -> None:
        hook = getattr(self.remedy, name, None) if self.remedy is not None else None
        if hook is None:
            return
        try:
            hook(self, model, arguments)
        except NotApplicable as reason:
            note = f"not applied to '{getattr(model, 'name', 'model')}': {reason}"
            if note not in self.notes:
                self.notes.append(note)

    def _refuse(self, model) -> None:
        if id(model) in self._refused:
            raise ContractError(
                "Received the original run's model again, expected a training callable that "
                "builds and compiles a new model each time (a trial must start from fresh "
                f"weights). Received: model {getattr(model, 'name', model)!r}",
                hint="move the model's construction and compile() inside train()")

    def _compile(self, original, signature, model, args, kwargs):
        self._refuse(model)
        key = ("compile", id(model))
        bound = self._bind(signature, model, args, kwargs)
        if bound is None or key in self._inside:
            return original(model, *args, **kwargs)
        self.ordinal(model)
        arguments = dict(bound.arguments)
        arguments.pop("self", None)
        self._hook("on_compile", model, arguments)
        self._inside.add(key)
        try:
            return original(model, **arguments)
        finally:
            self._inside.discard(key)

    def _fit(self, original, signature, model, args, kwargs):
        self._refuse(model)
        key = ("fit", id(model))
        bound = self._bind(signature, model, args, kwargs)
        if bound is None or key in self._inside:
            return original(model, *args, **kwargs)
        arguments = dict(bound.arguments)
        arguments.pop("self", None)
        capture = FitCapture(model=model, ordinal=self.ordinal(model), arguments=arguments)
        self.current = capture
        self._hook("on_fit", model, arguments)
        if self.epochs_fraction < 1:
            epochs = int(arguments.get("epochs", 1) or 1)
            start = int(arguments.get("initial_epoch", 0) or 0)
            arguments["epochs"] = start + max(1, math.ceil((epochs - start) * self.epochs_fraction))
        callbacks = arguments.get("callbacks")
        if callbacks is None or isinstance(callbacks, (list, tuple)):
            arguments["callbacks"] = [*(callbacks or ()), EpochLog(capture.epochs)]
        else:
            self.notes.append("callbacks given as a CallbackList: the epochs were not recorded")
        self.fits.append(capture)
        self._inside.add(key)
        try:
            return original(model, **arguments)
        except BaseException as error:
            capture.error = f"{type(error).__name__}: {error}"
            raise
        finally:
            self._inside.discard(key)
            stopper = capture.stopper
            if stopper is not None and getattr(stopper, "best_weights", None) is not None:
                capture.kept_epoch = int(stopper.best_epoch)


__all__ = ["EpochLog", "FitCapture", "Intercept"]
