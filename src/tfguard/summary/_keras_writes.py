"""What `keras.callbacks.TensorBoard` writes at an epoch end, written the way TensorBoard reads it.

* `weight_values(model)`: a histogram of every weight (`hist/weights/<path>`,
  the tag tfguard's own schedule uses) and, with `images=True`, each weight
  as an image (`images/weights/<path>`), as Keras lays them out (a kernel
  transposed to be wider than tall, a conv kernel one image per filter);
* `model_graph_values(model)`: the model's configuration for TensorBoard's
  Graphs tab (plugin `graph_keras_model`), as Keras writes it;
* `write_embedding_tables(run_dir, model, metadata)`: every `Embedding`
  table to the projector (`tfguard.summary._embeddings`).

Example:

>>> import keras
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="d")], name="m")
>>> values, pictures = weight_values(model, images=True)
>>> sorted(v.tag for v in values), [(tag, images.shape) for tag, images in pictures]
(['hist/weights/m/d/bias', 'hist/weights/m/d/kernel'], [('images/weights/m/d/kernel', (1, 2, 3, 1)), ('images/weights/m/d/bias', (1, 2, 1, 1))])
>>> [v.metadata.plugin_data.plugin_name for v in model_graph_values(model)]
['graph_keras_model']
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator

import keras
import numpy as np
from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

from tfguard import _tags
from tfguard._hooks.transaction import is_float
from tfguard._signals import histograms
from tfguard.lint._describe import leaf_layers
from tfguard.summary._embeddings import embedding_tables
from tfguard.summary._projector import MAX_POINTS, write_projector
from tfguard.summary._summary_values import histogram_value

GRAPH_PLUGIN = "graph_keras_model"  # TensorBoard's Graphs plugin reads this name for Keras models


def weight_image(weight: np.ndarray) -> np.ndarray | None:
    """A weight as Keras shows it: `[n, h, w, 1]` images in [0, 1], or `None` when it has no picture."""
    w = np.squeeze(np.asarray(weight, dtype=np.float64))
    if w.ndim == 1:
        w = w.reshape(1, w.shape[0], 1, 1)
    elif w.ndim == 2:
        w = w.T if w.shape[0] > w.shape[1] else w
        w = w.reshape(1, w.shape[0], w.shape[1], 1)
    elif w.ndim == 3:
        w = np.transpose(w, (2, 0, 1))[..., None]
    else:
        return None
    low, high = np.nanmin(w), np.nanmax(w)
    return (w - low) / (high - low) if high > low else np.zeros_like(w)


def weight_values(model: keras.Model, images: bool = False) -> tuple[list, list]:
    """Histograms of every weight as summary values, and `(tag, images)` of each weight's picture.

    The buckets are the firewall's own (`tfguard._signals.histograms.histograms_of`,
    all weights in one pass), so an epoch-end histogram reads like a
    step-level one.
    """
    weights = [v for v in model.weights if is_float(v)]  # the step-level weight histograms' choice
    if not weights:
        return [], []
    buckets = histograms.histograms_of(weights).numpy()
    values, pictures = [], []
    for variable, stacked in zip(weights, buckets, strict=True):
        values.append(histogram_value(_tags.hist_weights(variable.path), stacked.astype(np.float64)))
        if images:
            picture = weight_image(np.asarray(keras.ops.convert_to_numpy(variable)))
            if picture is not None:
                pictures.append((_tags.weight_image(variable.path), picture))
    return values, pictures


def model_graph_values(model: keras.Model) -> Iterator[summary_pb2.Summary.Value]:
    """The model's JSON configuration for TensorBoard's Graphs tab, none if it does not serialize.

    A generator: a deep model's JSON takes a while, and it is made where
    the values are read (`RunWriter.write_later` reads them in the writer's thread).
    """
    text = model_json(model)
    if text is None:  # a model Keras cannot serialize simply has no conceptual graph
        return
    metadata = summary_pb2.SummaryMetadata()
    metadata.plugin_data.plugin_name = GRAPH_PLUGIN
    metadata.plugin_data.content = b"1"
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING,
                                    tensor_shape=tensor_shape_pb2.TensorShapeProto())
    tensor.string_val.append(text.encode("utf-8"))
    yield summary_pb2.Summary.Value(tag="keras", tensor=tensor, metadata=metadata)


_JSON_OF_MODEL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""`model -> (its layout, its JSON)`: the JSON made at a `fit`'s start, kept for the next `fit` of the same layout."""


def model_json(model: keras.Model) -> str | None:
    """`model.to_json()`, made again only when the model's layout changed since it was last made.

    `to_json` serializes every layer's configuration: ~90 ms on a 252-layer
    model, at every `fit` a Logger starts. Between two `fit`s a model keeps
    its layers; what changes is whether each is trainable (transfer
    learning freezes and thaws them), so the layout is each layer's
    identity, class, name and `trainable` (`tfguard.lint`'s `leaf_layers`:
    nested models' layers included), and a model whose layout is unchanged gets the JSON made before.
    (A layer's configuration changed in place, say a `Dropout`'s `rate`
    set between two `fit`s, is not seen: the Graphs tab shows the layers
    as they were built.)

    Example:

    >>> import keras
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="d")])
    >>> model_json(model) is model_json(model)
    True
    >>> model.layers[0].trainable = False
    >>> '"trainable": false' in model_json(model)
    True

    Returns:
        The JSON, or `None` when Keras cannot serialize the model.
    """
    layout = _layout(model)
    kept = _JSON_OF_MODEL.get(model)
    if kept is not None and kept[0] == layout:
        return kept[1]
    try:
        text = model.to_json()
    except Exception:  # a model Keras cannot serialize (a subclassed one without get_config)
        text = None
    with contextlib.suppress(TypeError):  # a model that cannot be weakly referenced is not kept
        _JSON_OF_MODEL[model] = (layout, text)
    return text


def _layout(model: keras.Model) -> tuple:
    """The model's and each leaf layer's identity, class, name and `trainable` (a nested model's
    `trainable` is its layers', which Keras sets with it)."""
    return tuple((id(layer), type(layer).__name__, layer.name, bool(layer.trainable))
                 for layer in [model, *leaf_layers(model)])


def write_embedding_tables(run_dir: str, model: keras.Model, metadata=None) -> list[str]:
    """Every `Embedding` table to the projector in `run_dir`; returns the tables' names.

    Tables longer than the projector's limit keep their first rows.
    """
    written = []
    for table in embedding_tables(model, metadata):
        rows = min(len(table.vectors), MAX_POINTS)
        vectors = np.where(np.isfinite(table.vectors[:rows]), table.vectors[:rows], 0.0)
        write_projector(run_dir, vectors, table.labels[:rows], name=table.name)
        written.append(table.name)
    return written


__all__ = ["GRAPH_PLUGIN", "model_graph_values", "model_json", "weight_image", "weight_values",
           "write_embedding_tables"]
