"""What the front of a Keras model does to the scale of its inputs.

`front_of_model` walks from one model input to the first layer with weights
and reports whether something on the way normalizes the values (Rescaling,
Normalization, BatchNormalization, ...), reads them as ids (Embedding, a
lookup), or leaves them as they are (augmentation, resizing, reshaping). The
input check uses it to decide whether a raw-looking batch is a problem.

- Sequential models: the layer list, in order (nested models walked).
- Functional models: forward from the input tensor through the layer graph.
- Subclassed models: the order of `call()` is not visible, so any normalizing
  or id layer among the tracked layers counts; otherwise `"subclassed"`.

Example:

>>> import keras
>>> model = keras.Sequential(
...     [keras.Input((8, 8, 1)), keras.layers.Rescaling(1 / 255, name="scale"), keras.layers.Flatten()]
... )
>>> kind, layer = front_of_model(model)
>>> kind, layer.name
('normalized', 'scale')
"""

from __future__ import annotations

from typing import Any

import keras

from tfguard._hooks import keras_compat
from tfguard.lint._layer_kinds import SCALE_PRESERVING_LAYERS

NORMALIZING_LAYERS = frozenset(
    {
        "Rescaling",
        "Normalization",
        "BatchNormalization",
        "LayerNormalization",
        "GroupNormalization",
        "UnitNormalization",
        "RMSNormalization",
    }
)
ID_LAYERS = frozenset(
    {
        "Embedding",
        "StringLookup",
        "IntegerLookup",
        "CategoryEncoding",
        "Hashing",
        "HashedCrossing",
        "Discretization",
        "TextVectorization",
        "FeatureSpace",
    }
)
def _classify(layer) -> str:
    cls = type(layer).__name__
    if cls in NORMALIZING_LAYERS:
        return "normalized"
    if cls in ID_LAYERS:
        return "ids"
    if cls in SCALE_PRESERVING_LAYERS or cls.startswith("Random"):
        return "pass"
    if isinstance(layer, keras.Model):
        return "model"
    if getattr(layer, "weights", None):
        return "raw"
    return "unknown"


def _front_of_layers(layers) -> tuple[str, Any]:
    for layer in layers:
        kind = _classify(layer)
        if kind == "pass":
            continue
        if kind == "model":
            kind, found = front_of_model(layer)
            if kind == "pass":
                continue
            return kind, found
        return kind, layer
    return "pass", None


def _front_of_graph(tensor) -> tuple[str, Any]:
    """Walks forward from one functional input to the first layers that matter."""
    seen, results = set(), []
    start = keras_compat.keras_history(tensor)
    frontier = [start.operation] if start is not None and start.operation else []
    while frontier:
        op = frontier.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        kind = _classify(op)
        if kind == "model":
            kind, found = front_of_model(op)
            if kind != "pass":
                results.append((kind, found))
                continue
        elif kind != "pass":
            results.append((kind, op))
            continue
        frontier.extend(keras_compat.consumers(op))
    for wanted in ("normalized", "ids", "unknown", "raw"):
        for kind, layer in results:
            if kind == wanted:
                return kind, layer
    return "pass", None


def front_of_model(model, index: int = 0) -> tuple[str, Any]:
    """Reads what the front of a model does to the scale of one input.

    Args:
        model: a Keras model.
        index: which model input (for functional models). Defaults to `0`.

    Returns:
        `(kind, layer)`: kind is `"normalized"` (a normalizing layer comes
        before the first layer with weights), `"ids"` (a lookup or Embedding),
        `"raw"` (a layer with weights sees the values as given), `"unknown"`
        (a weightless layer or op tfguard cannot read), `"subclassed"` (the
        order of `call()` is not visible) or `"pass"` (nothing but layers that
        keep the scale); `layer` is the deciding layer or `None`.
    """
    inputs = None
    if not isinstance(model, keras.Sequential):
        try:
            inputs = model.inputs
        except (AttributeError, ValueError):
            inputs = None
    if inputs:
        return _front_of_graph(inputs[min(index, len(inputs) - 1)])
    if isinstance(model, keras.Sequential):
        return _front_of_layers(model.layers)
    for layer in keras_compat.nested_layers(model):
        if _classify(layer) in ("normalized", "ids"):
            return _classify(layer), layer
    return "subclassed", None
