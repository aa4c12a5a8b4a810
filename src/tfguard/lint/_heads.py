"""The output heads of a Keras model: units and final activation of each output.

A lint rule compares what the model emits with what the loss expects, so it
needs, for every output, the number of units and the activation applied last.
`output_heads` reads them from the structure where it can:

- functional models: walk back from each output tensor through layers that do
  not change values (Dropout, Flatten, Reshape, ...), into nested models, to
  the layer or op that sets the activation: `Dense(..., activation=...)`, an
  `Activation`/`Softmax`/`ReLU` layer, or a `keras.ops.softmax` call;
- Sequential models: the same walk over the layer list, from the end;
- subclassed models (and any head ending in a layer tfguard cannot read, such
  as a `Lambda`): when the model is built, it is *probed*, i.e. called once
  in inference mode on a random batch, and the activation is read from the
  values (rows summing to 1 -> softmax, inside (0, 1) -> sigmoid, exact zeros
  and no negatives -> relu, negatives -> linear). An unbuilt subclassed model
  falls back to its last tracked layer (`source="last_layer"`, a guess).

Example:

>>> import keras
>>> model = keras.Sequential(
...     [keras.Input((4,)), keras.layers.Dense(3), keras.layers.Softmax(name="probs")]
... )
>>> head = output_heads(model)[0]
>>> head.units, head.activation, head.layer
(3, 'softmax', 'probs')
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np

from tfguard._errors import ContractError
from tfguard._hooks import keras_compat
from tfguard._hooks.untouched import call, untouched
from tfguard.lint._layer_kinds import PASS_THROUGH_LAYERS

# Layer classes (and keras.ops operation classes) that are an activation.
_ACTIVATION_CLASSES = {
    "Softmax": "softmax",
    "LogSoftmax": "log_softmax",
    "ReLU": "relu",
    "Relu": "relu",
    "Relu6": "relu6",
    "LeakyReLU": "leaky_relu",
    "LeakyRelu": "leaky_relu",
    "ELU": "elu",
    "Elu": "elu",
    "PReLU": "prelu",
    "Sigmoid": "sigmoid",
    "HardSigmoid": "hard_sigmoid",
    "Tanh": "tanh",
    "Softplus": "softplus",
    "Selu": "selu",
    "Gelu": "gelu",
    "Silu": "silu",
    "Exp": "exponential",
}

_PROBE_BATCH = 16


@dataclasses.dataclass(frozen=True)
class OutputHead:
    """One model output as the loss sees it.

    Args:
        name: the output name (`model.output_names`), or `"output_0"`, ...
        units: size of the last axis, or `None` when unknown.
        activation: the final activation (`"softmax"`, `"sigmoid"`,
            `"linear"`, `"relu"`, ...), or `None` when it cannot be read.
        source: how the activation was read: `"layer"` (from the structure),
            `"probe"` (from the values of one forward pass), `"last_layer"`
            (a guess from the last tracked layer of an unbuilt model), or
            `None`.
        layer: the name of the layer or op that sets the activation, or `None`.
        rank: the rank of the output, batch axis included (2 for
            `(batch, units)`), or `None` when unknown. Defaults to `None`.
    """

    name: str
    units: int | None
    activation: str | None
    source: str | None
    layer: str | None
    rank: int | None = None


def activation_name(fn) -> str | None:
    """Returns the canonical name of an activation function, or `None`.

    `tf.nn.softmax` is `"softmax"` (its `__name__` is `softmax_v2`), `None`
    and `keras.activations.linear` are `"linear"`, a lambda is `"lambda"`.

    Args:
        fn: an activation callable, string or `None`.

    Returns:
        The name as Keras spells it in `keras.activations`.
    """
    if fn is None:
        return "linear"
    if isinstance(fn, str):
        return keras.activations.get(fn).__name__
    name = getattr(fn, "__name__", None)
    if name is None:
        name = getattr(getattr(fn, "func", None), "__name__", None)  # functools.partial
    if name is None:
        return type(fn).__name__.lower()
    if name == "<lambda>":
        return "lambda"
    for suffix in ("_v2", "_v1"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def layer_activation(layer) -> str | None:
    """Returns the activation a layer applies last, or `None` if it has none.

    Args:
        layer: a Keras layer or operation.

    Returns:
        The activation name (`Dense(3)` gives `"linear"`, `Softmax()` gives
        `"softmax"`), or `None` for a layer without an activation.
    """
    cls = type(layer).__name__
    if cls in _ACTIVATION_CLASSES:
        return _ACTIVATION_CLASSES[cls]
    activation = getattr(layer, "activation", None)
    if callable(activation) or isinstance(activation, str):
        return activation_name(activation)
    return None


def _last_dim(shape) -> int | None:
    try:
        dim = shape[-1]
    except (IndexError, TypeError):
        return None
    return int(dim) if dim is not None else None


def _walk_tensor(tensor, depth: int = 0) -> tuple[str | None, str | None]:
    """Walks back from a symbolic tensor to its activation: (activation, layer name)."""
    history = keras_compat.keras_history(tensor)
    op = getattr(history, "operation", None)
    if op is None or depth > 64:
        return None, None
    if isinstance(op, keras.Model):
        if getattr(op, "outputs", None):
            return _walk_tensor(op.outputs[history.tensor_index], depth + 1)
        if isinstance(op, keras.Sequential):
            return _walk_layers(op.layers)
        return None, None
    activation = layer_activation(op)
    if activation is not None:
        return activation, op.name
    if type(op).__name__ in PASS_THROUGH_LAYERS:
        inputs = keras_compat.producer_inputs(tensor)
        if len(inputs) == 1:
            return _walk_tensor(inputs[0], depth + 1)
    return None, None


def _walk_layers(layers) -> tuple[str | None, str | None]:
    """Walks a Sequential layer list from the end: (activation, layer name)."""
    for layer in reversed(list(layers)):
        if isinstance(layer, keras.Sequential):
            return _walk_layers(layer.layers)
        if isinstance(layer, keras.Model):
            outputs = getattr(layer, "outputs", None)
            return _walk_tensor(outputs[0]) if outputs else (None, None)
        activation = layer_activation(layer)
        if activation is not None:
            return activation, layer.name
        if type(layer).__name__ not in PASS_THROUGH_LAYERS:
            return None, None
    return None, None


def input_shapes(model) -> list[tuple] | None:
    """Returns the input shape(s) of a model (batch axis `None`), or `None`.

    Reads `model.inputs` for Sequential and functional models and the shapes a
    subclassed model was built with otherwise.

    Args:
        model: a Keras model.

    Returns:
        One shape tuple per input, or `None` when the model was never built.
    """
    inputs = None
    try:
        inputs = model.inputs
    except (AttributeError, ValueError):
        inputs = None
    if inputs:
        return [tuple(t.shape) for t in inputs]
    shapes = keras_compat.build_shapes(model)
    if shapes:
        result = []
        for shape in shapes.values():
            if isinstance(shape, (list, tuple)) and shape and isinstance(shape[0], (list, tuple)):
                result.extend((None, *tuple(s)[1:]) for s in shape)
            elif isinstance(shape, (list, tuple)):
                result.append((None, *tuple(shape)[1:]))
        return result or None
    return None


def classify_values(values: np.ndarray) -> str | None:
    """Names the activation that could have produced these output values.

    Args:
        values: one output of a forward pass, shape `(batch, ..., units)`.

    Returns:
        `"softmax"` (rows in [0, 1] summing to 1), `"sigmoid"` (inside
        (0, 1)), `"relu"` (no negatives, some exact zeros), `"linear"` (some
        negatives), or `None` (positive values above 1, non-finite or empty
        values: no activation can be named).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0 or not np.all(np.isfinite(values)):
        return None
    low, high = values.min(), values.max()
    if low < 0:
        return "linear"
    # a saturated softmax or sigmoid (large weights, raw inputs: issue 22) underflows to exact
    # zeros and ones; rows summing to 1, or an exact 1.0 among values in [0, 1], are not a ReLU's
    if high <= 1.0 and values.shape[-1] > 1 and np.allclose(values.sum(axis=-1), 1.0, atol=1e-3):
        return "softmax"
    if np.any(values == 0) and high != 1.0:
        return "relu"
    if high <= 1.0 and values.shape[-1] == 1 and np.allclose(values, 1.0, atol=1e-3):
        return "softmax"  # a softmax over one unit is always 1
    if high <= 1.0:
        return "sigmoid"
    return None


def probe_outputs(model) -> list | None:
    """Calls a built model once, in inference mode, on a random batch.

    Args:
        model: a Keras model whose input shapes are known.

    Returns:
        The flat list of outputs as numpy arrays, with their names as
        `(name, array)` pairs, or `None` when the model cannot be called this
        way (unknown shapes, integer or string inputs it rejects).
    """
    shapes = input_shapes(model)
    if not shapes or any(d is None for s in shapes for d in s[1:]):
        return None
    rng = np.random.default_rng(0)
    for make in (rng.standard_normal, lambda size: np.abs(rng.standard_normal(size))):
        batch = [make((_PROBE_BATCH, *s[1:])).astype("float32") for s in shapes]
        try:
            with untouched(model):
                out = call(model, batch[0] if len(batch) == 1 else batch, training=False)
        except Exception:  # noqa: BLE001 - any failure (an unbuilt model too) means "cannot probe"
            continue
        if isinstance(out, dict):
            return [(str(k), np.asarray(v)) for k, v in out.items()]
        flat = keras.tree.flatten(out)
        return [(f"output_{i}", np.asarray(v)) for i, v in enumerate(flat)]
    return None


def _output_names(model, count: int) -> list[str]:
    names = list(getattr(model, "output_names", None) or [])
    if len(names) != count:
        names = [f"output_{i}" for i in range(count)]
    return names


def output_heads(model) -> list[OutputHead]:
    """Reads units and final activation of every output of a model.

    Args:
        model: a Keras model (Sequential, functional or subclassed; built or not).

    Returns:
        One `OutputHead` per output, in `model.outputs` order. A model whose
        outputs cannot be read at all gives one head with `None` fields.

    Raises:
        TypeError: if `model` is not a `keras.Model`.
    """
    if not isinstance(model, keras.Model):
        raise ContractError(
            f"Received an invalid value for `model`, expected a keras.Model. "
            f"Received: model of type {type(model).__name__}"
        )
    outputs = None
    if not isinstance(model, keras.Sequential) or model.built:
        try:
            outputs = model.outputs
        except (AttributeError, ValueError):
            outputs = None
    if outputs:
        heads = []
        names = _output_names(model, len(outputs))
        for name, tensor in zip(names, outputs):
            if isinstance(model, keras.Sequential):
                activation, layer = _walk_layers(model.layers)
            else:
                activation, layer = _walk_tensor(tensor)
            heads.append(
                OutputHead(
                    name=name,
                    units=_last_dim(tensor.shape),
                    activation=activation,
                    source="layer" if activation is not None else None,
                    layer=layer,
                    rank=len(tensor.shape),
                )
            )
        if all(h.activation is not None for h in heads):
            return heads
        probed = probe_outputs(model)
        if probed is None or len(probed) != len(heads):
            return heads
        return [
            h
            if h.activation is not None
            else dataclasses.replace(h, activation=classify_values(v), source="probe")
            for h, (_, v) in zip(heads, probed)
        ]
    if isinstance(model, keras.Sequential):
        activation, layer = _walk_layers(model.layers)
        units = next(
            (getattr(x, "units", None) for x in reversed(model.layers) if hasattr(x, "units")),
            None,
        )
        return [
            OutputHead(
                name=model.name,
                units=units,
                activation=activation,
                source="layer" if activation is not None else None,
                layer=layer,
            )
        ]
    probed = probe_outputs(model) if model.built else None
    if probed:
        return [
            OutputHead(
                name=name,
                units=_last_dim(values.shape),
                activation=classify_values(values),
                source="probe",
                layer=None,
                rank=values.ndim,
            )
            for name, values in probed
        ]
    layers = list(model.layers)
    last = layers[-1] if layers else None
    return [
        OutputHead(
            name="output_0",
            units=getattr(last, "units", None),
            activation=layer_activation(last) if last is not None else None,
            source="last_layer" if last is not None and layer_activation(last) else None,
            layer=last.name if last is not None else None,
        )
    ]
