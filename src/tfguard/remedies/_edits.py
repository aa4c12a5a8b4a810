"""The mechanical changes a remedy makes: to an optimizer, a layer, a loss, or the data `fit` gets.

Each function makes one change a person would make in the script, and
returns the one-line text of that change (`"learning_rate 1.0 → 0.1"`), so
a trial reports exactly what it did. A change that does not apply to what
the script built (a learning-rate *schedule*, dict inputs, a loss without a
`from_logits`) raises `NotApplicable` with the reason, and the trial says so
instead of guessing.

The data changes work on numpy arrays and on `tf.data` datasets of
`(x, y)` or `(x, y, sample_weight)` elements; statistics of a dataset are
taken from its first `SAMPLE_BATCHES` batches.

Example:

>>> import keras, numpy as np
>>> opt, text = scale_learning_rate(keras.optimizers.SGD(1.0), 0.1)
>>> text, round(float(opt.learning_rate), 3)
('SGD learning_rate 1 → 0.1', 0.1)
>>> src, dst, text = label_mapping(np.array([1, 2, 3, 4]), 0, 9)
>>> remap_labels(np.array([[4], [1]]), src, dst).ravel().tolist(), text
([3, 0], 'labels {1, 2, …, 4} → {0, 1, …, 3}')
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard._findings import fmt
from tfguard._losses import CROSSENTROPY_KINDS, keras_loss
from tfguard._optimizer_state import learning_rate, learning_rate_is_fixed
from tfguard.lint._losses import LossInfo, resolve_loss

SAMPLE_BATCHES = 64  # batches of a tf.data dataset read for statistics or label values


class NotApplicable(ValueError):
    """The remedy does not apply to what the script built; the message says why."""


# -- the optimizer ---------------------------------------------------------------------
def optimizer_of(optimizer):
    """The optimizer instance `compile` will use (a name like `"adam"` made into one).

    Example:

    >>> type(optimizer_of("adam")).__name__
    'Adam'
    """
    if optimizer is None:
        raise NotApplicable("the model is compiled without an optimizer")
    try:
        return keras.optimizers.get(optimizer)
    except (ValueError, TypeError) as error:
        raise NotApplicable(f"the optimizer {optimizer!r} cannot be read: {error}") from error


def learning_rate_of(optimizer) -> float:
    """The optimizer's learning rate as a number.

    Raises:
        NotApplicable: for a learning-rate schedule.
    """
    if not learning_rate_is_fixed(optimizer):
        raise NotApplicable(f"{type(optimizer).__name__}'s learning rate is a schedule")
    return learning_rate(optimizer)


def scale_learning_rate(optimizer, factor: float | None = None, value: float | None = None):
    """Sets the optimizer's learning rate to `value`, or multiplies it by `factor`.

    Example:

    >>> opt, text = scale_learning_rate("sgd", value=0.5)
    >>> text
    'SGD learning_rate 0.01 → 0.5'

    Returns:
        `(optimizer, text)`: the optimizer instance to compile with, and the change.

    Raises:
        NotApplicable: for a schedule, or an optimizer that cannot be read.
    """
    optimizer = optimizer_of(optimizer)
    old = learning_rate_of(optimizer)
    new = float(value) if value is not None else old * float(factor)
    optimizer.learning_rate = new
    return optimizer, f"{type(optimizer).__name__} learning_rate {fmt(old)} → {fmt(new)}"


def set_clipnorm(optimizer, clipnorm: float = 1.0):
    """Clips each gradient to norm `clipnorm` (as `clipnorm=` in the optimizer's constructor).

    Example:

    >>> opt, text = set_clipnorm("adam")
    >>> opt.clipnorm, text
    (1.0, 'Adam(clipnorm=1.0)')
    """
    optimizer = optimizer_of(optimizer)
    if getattr(optimizer, "global_clipnorm", None) or getattr(optimizer, "clipvalue", None):
        raise NotApplicable(f"{type(optimizer).__name__} already clips its gradients")
    optimizer.clipnorm = float(clipnorm)
    return optimizer, f"{type(optimizer).__name__}(clipnorm={float(clipnorm)})"


# -- layers and the loss -------------------------------------------------------------------
def activation_name(layer) -> str | None:
    """The name of a layer's activation (`"linear"` for none), or `None` if it has none to set.

    Example:

    >>> import keras
    >>> activation_name(keras.layers.Dense(2, activation="relu")), activation_name(keras.layers.Flatten())
    ('relu', None)
    """
    act = getattr(layer, "activation", None)
    if act is None:
        return None
    return getattr(act, "__name__", type(act).__name__)


def set_activation(layer, name: str) -> str:
    """Sets a layer's activation; returns `"output activation relu → softmax"`-style text."""
    old = activation_name(layer)
    if old is None:
        raise NotApplicable(f"layer '{layer.name}' has no activation to change")
    layer.activation = keras.activations.get(name)
    return f"layer '{layer.name}' activation {old} → {name}"


def reinitialize(layer, kernel_initializer: str, *, zero_bias: bool = True) -> str:
    """Draws a layer's kernel afresh from `kernel_initializer` (and zeroes its bias).

    Example:

    >>> import keras
    >>> layer = keras.layers.Dense(4, bias_initializer="ones")
    >>> layer.build((None, 3))
    >>> reinitialize(layer, "he_normal"), float(layer.bias.numpy().sum())
    ("layer 'dense...' kernel_initializer='he_normal', bias_initializer='zeros'", 0.0)
    """
    init = keras.initializers.get(kernel_initializer)
    kernel = getattr(layer, "kernel", None) if layer.built else None
    if layer.built and kernel is None:
        raise NotApplicable(f"layer '{layer.name}' has no kernel")
    if kernel is not None:
        kernel.assign(init(tuple(kernel.shape), dtype=kernel.dtype))
        bias = getattr(layer, "bias", None)
        if zero_bias and bias is not None:
            bias.assign(np.zeros(tuple(bias.shape), dtype=bias.dtype))
    else:  # not built yet: it will draw its weights from these
        layer.kernel_initializer = init
        if zero_bias:
            layer.bias_initializer = keras.initializers.get("zeros")
    text = f"layer '{layer.name}' kernel_initializer={kernel_initializer!r}"
    return text + (", bias_initializer='zeros'" if zero_bias else "")


def crossentropy(loss) -> LossInfo:
    """A compile `loss` read by `tfguard.lint._losses.resolve_loss`, when it is one cross-entropy.

    Example:

    >>> import keras
    >>> info = crossentropy(keras.losses.BinaryCrossentropy(from_logits=True))
    >>> info.kind, info.from_logits
    ('binary', True)

    Raises:
        NotApplicable: for any other loss, or one loss per output.
    """
    try:
        info = resolve_loss(loss)
    except ContractError as err:
        raise NotApplicable(str(err)) from None
    if info.kind not in CROSSENTROPY_KINDS:
        raise NotApplicable(f"the loss {loss!r} is not a cross-entropy")
    return info


def logits_loss(loss):
    """The same cross-entropy with `from_logits=True`; returns `(loss, text)`.

    A `keras.losses.Loss` object keeps the rest of its configuration
    (`ignore_class`, `label_smoothing`, a focal loss's `gamma`).

    Example:

    >>> loss, text = logits_loss("sparse_categorical_crossentropy")
    >>> loss.from_logits, text
    (True, 'SparseCategoricalCrossentropy(from_logits=True)')
    """
    info = crossentropy(loss)
    if info.from_logits:
        raise NotApplicable("the loss already takes logits")
    if isinstance(loss, keras.losses.Loss) and "from_logits" in loss.get_config():
        name = type(loss).__name__
        return type(loss).from_config({**loss.get_config(), "from_logits": True}), f"{name}(from_logits=True)"
    known = keras_loss(info.name)
    if known is None:  # "crossentropy": Keras picks the cross-entropy from the labels at fit time
        raise NotApplicable(f"the loss {loss!r} does not say which cross-entropy it is")
    kwargs = {"ignore_class": info.ignore_class} if info.ignore_class is not None else {}
    return getattr(keras.losses, known.cls)(from_logits=True, **kwargs), f"{known.cls}(from_logits=True)"


def output_layer(model, index: int | None = None):
    """The model's output layer (its last layer with an activation), or the layer at `index`."""
    layers = list(model.layers)
    if index is not None:
        if not -len(layers) <= index < len(layers):
            raise NotApplicable(f"the model has no layer {index}")
        return layers[index]
    for layer in reversed(layers):
        if activation_name(layer) is not None:
            return layer
    raise NotApplicable("the model has no output layer with an activation")


# -- the data fit gets -----------------------------------------------------------------------------
def sample_dataset(dataset) -> tuple[np.ndarray, np.ndarray | None]:
    """`(inputs, labels)` of the first `SAMPLE_BATCHES` batches of a dataset, as arrays."""
    xs, ys = [], []
    for element in dataset.take(SAMPLE_BATCHES):
        parts = element if isinstance(element, tuple) else (element,)
        if isinstance(parts[0], dict):
            raise NotApplicable("the inputs are a dict of features")
        xs.append(np.asarray(parts[0]))
        if len(parts) > 1:
            ys.append(np.asarray(parts[1]))
    if not xs:
        raise NotApplicable("the dataset is empty")
    return np.concatenate(xs), (np.concatenate(ys) if ys else None)


def _array(x, what: str) -> np.ndarray:
    if isinstance(x, (dict, list, tuple)):
        raise NotApplicable(f"the {what} are a dict or a list of arrays")
    array = np.asarray(x)
    if array.dtype.kind not in "fiub" or array.ndim < 1:
        raise NotApplicable(f"the {what} are not numeric arrays (dtype {array.dtype})")
    return array


def feature_stats(x, validation_split: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation per feature (the last axis), as `Normalization().adapt` computes.

    Only the training part is read: the last `validation_split` of the rows
    is left out, as Keras leaves it out of training.

    Example:

    >>> mean, std = feature_stats(np.array([[0.0, 10.0], [2.0, 30.0]]))
    >>> mean.tolist(), std.tolist()
    ([1.0, 20.0], [1.0, 10.0])
    """
    if isinstance(x, tf.data.Dataset):
        x = sample_dataset(x)[0]
    x = _array(x, "inputs").astype("float64")
    if validation_split:
        x = x[: max(1, int(len(x) * (1 - validation_split)))]
    axes = tuple(range(x.ndim - 1))
    mean, std = x.mean(axis=axes), x.std(axis=axes)
    return mean.astype("float32"), np.where(std > 1e-7, std, 1.0).astype("float32")


def standardize(x, mean: np.ndarray, std: np.ndarray):
    """`(x - mean) / std`, for an array, or mapped over a `tf.data` dataset's inputs."""
    if isinstance(x, tf.data.Dataset):
        def fn(*parts):
            inputs = (tf.cast(parts[0], tf.float32) - mean) / std
            return (inputs, *parts[1:]) if len(parts) > 1 else inputs
        return x.map(fn)
    return ((_array(x, "inputs").astype("float32") - mean) / std).astype("float32")


def label_values(y) -> np.ndarray:
    """The sorted distinct label values of `y` (an array or a dataset's labels)."""
    if isinstance(y, tf.data.Dataset):
        y = sample_dataset(y)[1]
        if y is None:
            raise NotApplicable("the dataset has no labels")
    return np.unique(_array(y, "labels"))


def label_mapping(values: np.ndarray, low: float, high: float):
    """The mapping the data suggests from the label values seen to the range `[low, high]`.

    Few distinct values (classes) are numbered in order from `low` (two
    values become `low` and `high`: `{-1, 1} → {0, 1}`); many (a
    regression target) are scaled linearly into the range.

    Example:

    >>> src, dst, text = label_mapping(np.array([-1.0, 1.0]), 0, 1)
    >>> dst.tolist(), text
    ([0.0, 1.0], 'labels {-1, 1} → {0, 1}')

    Returns:
        `(source values, target values, text)`.
    """
    values = np.asarray(values, dtype="float64")
    span = float(high) - float(low)
    n = len(values)
    if n == 0:
        raise NotApplicable("no labels were seen")
    if n == 2:
        target = np.array([low, high], dtype="float64")
    elif n <= span + 1:
        target = float(low) + np.arange(n, dtype="float64")
    else:
        lo, hi = float(values.min()), float(values.max())
        scale = span / (hi - lo) if hi > lo else 1.0
        target = float(low) + (values - lo) * scale
        return values, target, (f"targets scaled from [{fmt(lo)}, {fmt(hi)}] into "
                                f"[{fmt(low)}, {fmt(high)}]")
    return values, target, f"labels {_set(values)} → {_set(target)}"


def _set(values: np.ndarray) -> str:
    shown = [fmt(v) for v in values]
    if len(shown) > 3:
        shown = [shown[0], shown[1], "…", shown[-1]]
    return "{" + ", ".join(shown) + "}"


def remap_labels(y, source: np.ndarray, target: np.ndarray):
    """`y` with each value of `source` replaced by the `target` at its position (arrays or datasets)."""
    if isinstance(y, tf.data.Dataset):
        src = tf.constant(source, tf.float64)
        dst = tf.constant(target, tf.float64)

        def fn(x, labels, *rest):
            flat = tf.reshape(tf.cast(labels, tf.float64), [-1])
            idx = tf.clip_by_value(tf.searchsorted(src, flat), 0, len(source) - 1)
            mapped = tf.reshape(tf.gather(dst, idx), tf.shape(labels))
            return (x, tf.cast(mapped, labels.dtype if labels.dtype.is_floating else tf.float32),
                    *rest)
        return y.map(fn)
    labels = _array(y, "labels")
    idx = np.clip(np.searchsorted(source, labels.astype("float64")), 0, len(source) - 1)
    mapped = np.asarray(target)[idx]
    integral = all(math.isclose(v, round(v)) for v in np.asarray(target).tolist())
    return mapped.astype(labels.dtype if labels.dtype.kind == "f" or integral else "float32")


__all__ = ["SAMPLE_BATCHES", "NotApplicable", "activation_name", "crossentropy", "feature_stats",
           "label_mapping",
           "learning_rate_of",
           "label_values", "logits_loss", "optimizer_of", "output_layer",
           "reinitialize", "remap_labels", "sample_dataset", "scale_learning_rate", "set_activation", "set_clipnorm",
           "standardize"]
