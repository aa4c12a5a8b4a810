"""What one `fit()` call says about itself: its run name, callbacks and hyperparameters.

`AttachSession` reads every intercepted `keras.Model.fit` call through these
helpers: `run_name` names the call's run (the model's name and the fit's
1-based index in the session, made safe for a folder name), `user_callbacks`
reads the `callbacks` argument however it was passed, and `fit_hparams`
collects the hyperparameters a person compares runs by (optimizer, learning
rate, loss, batch size, epochs, and how many examples it validates on) without
changing anything.

Example:

>>> import keras
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)], name="my model")
>>> model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
>>> run_name(model, 2)
'my_model-fit2'
>>> hp = fit_hparams(model, {"epochs": 3, "batch_size": 16})
>>> hp["optimizer"], hp["learning_rate"], hp["loss"], hp["epochs"]
('SGD', 0.1, 'mse', 3)
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import keras
import numpy as np

from tfguard._optimizer_state import learning_rate

_UNSAFE = re.compile(r"[^\w.-]+")


def run_name(model: keras.Model, index: int) -> str:
    """The run name of a model's fit call: `<model name>-fit<index>`.

    Example:

    >>> import keras
    >>> run_name(keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)], name="mlp"), 1)
    'mlp-fit1'

    Args:
        model: the model being fitted.
        index: the fit call's 1-based index in the session.

    Returns:
        A name safe as a folder name (characters other than letters, digits,
        `_`, `.` and `-` become `_`).
    """
    name = _UNSAFE.sub("_", str(getattr(model, "name", "") or "model")).strip("._") or "model"
    return f"{name}-fit{int(index)}"


def user_callbacks(callbacks) -> list | None:
    """The callbacks a fit call was given, as a new list.

    Example:

    >>> user_callbacks(None), user_callbacks(())
    ([], [])

    Args:
        callbacks: the `callbacks` argument of `fit`: `None`, a list or a
            tuple of callbacks, or a `keras.callbacks.CallbackList`.

    Returns:
        A new list of the callbacks, or `None` for a `CallbackList` (Keras
        uses one as given, so nothing can be added to it without changing
        the caller's object).
    """
    if callbacks is None:
        return []
    if isinstance(callbacks, keras.callbacks.CallbackList):
        return None
    if isinstance(callbacks, keras.callbacks.Callback):
        return [callbacks]
    return list(callbacks)


def _learning_rate(optimizer) -> float | None:
    value = learning_rate(optimizer)  # None when there is no number to read
    return float(f"{value:.7g}") if value is not None and np.isfinite(value) else None  # 1e-2, not 0.009999999776


def _loss_name(loss) -> str | None:
    if loss is None:
        return None
    if isinstance(loss, str):
        return loss
    if isinstance(loss, Mapping):
        return ",".join(f"{k}:{_loss_name(v)}" for k, v in loss.items())
    if isinstance(loss, (list, tuple)):
        return ",".join(str(_loss_name(v)) for v in loss)
    fn = getattr(loss, "fn", None)
    if fn is not None and hasattr(fn, "__name__"):
        return fn.__name__
    return getattr(loss, "__name__", None) or type(loss).__name__


def _named_optimizers(model: keras.Model) -> dict:
    """`model.optimizer` as `optimizer`, then every other optimizer the model holds by its attribute name."""
    named = {}
    main = getattr(model, "optimizer", None)
    if isinstance(main, keras.optimizers.Optimizer):
        named["optimizer"] = main
    for attribute, value in list(vars(model).items()):
        if isinstance(value, keras.optimizers.Optimizer) and all(value is not o for o in named.values()):
            named[attribute.lstrip("_") or "optimizer"] = value
    return named


def fit_hparams(model: keras.Model, arguments: Mapping) -> dict:
    """The hyperparameters of one fit call, read from the compiled model and the call.

    Example:

    >>> import keras
    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> m.compile(optimizer="adam", loss="mse")
    >>> sorted(fit_hparams(m, {}))
    ['learning_rate', 'loss', 'model', 'optimizer']

    Args:
        model: the compiled model.
        arguments: the fit call's arguments by name (`batch_size`, `epochs`, ...).

    Returns:
        name -> str, int or float; an unknown value is left out. A model
        holding more optimizers than `model.optimizer` (a GAN's
        `d_optimizer` and `g_optimizer`) has each under its attribute name,
        with `<name>_learning_rate`.
    """
    hparams: dict = {"model": str(getattr(model, "name", "model"))}
    for name, optimizer in _named_optimizers(model).items():  # a GAN has two, or more
        hparams[name] = type(optimizer).__name__
        lr = _learning_rate(optimizer)
        if lr is not None:
            hparams["learning_rate" if name == "optimizer" else f"{name}_learning_rate"] = lr
    loss = _loss_name(getattr(model, "loss", None))
    if loss:
        hparams["loss"] = loss
    for name in ("batch_size", "epochs"):
        value = arguments.get(name)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            hparams[name] = int(value)
    examples = validation_examples(arguments)
    if examples is not None:
        hparams["validation_examples"] = examples
    return hparams


def _rows(data) -> int | None:
    """The number of examples of in-memory data (an array, a list or dict of arrays), else `None`."""
    if isinstance(data, Mapping):
        data = next(iter(data.values()), None)
    elif isinstance(data, (list, tuple)) and data and hasattr(data[0], "shape"):
        data = data[0]  # several inputs: each holds every example
    shape = getattr(data, "shape", None)
    if shape is None or not len(shape):
        return len(data) if isinstance(data, (list, tuple)) else None
    try:
        return int(shape[0])
    except (TypeError, ValueError):  # an unknown leading dimension
        return None


def validation_examples(arguments: Mapping) -> int | None:
    """How many examples a fit call validates on, when its data is in memory; else `None`.

    `validation_data=(x, y[, weights])` counts `x`'s rows; `validation_split` counts what Keras
    holds out of `x` (`n - ceil(n * (1 - split))`); a dataset or generator is not counted.

    Example:

    >>> validation_examples({"x": np.zeros((10, 2)), "validation_split": 0.25})
    2
    >>> validation_examples({"validation_data": (np.zeros((1, 4)), np.ones(1))})
    1
    """
    data = arguments.get("validation_data")
    if isinstance(data, (tuple, list)) and data:
        return _rows(data[0])
    split = arguments.get("validation_split")
    if data is None and isinstance(split, (float, int)) and not isinstance(split, bool) and 0 < split < 1:
        total = _rows(arguments.get("x"))
        if total is not None:
            return total - int(np.ceil(total * (1.0 - split)))
    return None


__all__ = ["fit_hparams", "run_name", "user_callbacks", "validation_examples"]
