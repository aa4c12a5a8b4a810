"""One eager forward pass of the model's own `call`, every nested layer's output recorded.

`forward(model, x)` runs `model(x, training=False)` (what `predict` and
`evaluate` run) once, eagerly, with a tap on every nested layer
(`tfguard._hooks.taps`), and returns the model's outputs, what each layer
returned in the order the layers completed, and which trainable variables
the pass read. `untouched(model)` puts every variable the probe may move
back as it was: BatchNormalization statistics assigned by a layer that
hard-codes `training=True`, Dropout's seed state, metric totals.

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="d")], name="m")
>>> seen = forward(model, np.ones((4, 3), "float32"))
>>> [layer.path for layer in seen.layers], sorted(seen.read)
(['m/d'], ['m/d/bias', 'm/d/kernel'])
"""

from __future__ import annotations

import contextlib
import dataclasses

import keras
import numpy as np
import tensorflow as tf

from tfguard._hooks import keras_compat, taps
from tfguard._hooks.untouched import call


@dataclasses.dataclass(frozen=True)
class LayerOutput:
    """What one layer call returned: its path, class name, whether it is a model, numpy outputs."""

    path: str
    kind: str
    is_model: bool
    arrays: list


@dataclasses.dataclass
class Seen:
    """What one forward pass showed.

    Args:
        outputs: the model's outputs, flattened, as numpy arrays.
        layers: a `LayerOutput` per layer call, in the order the calls completed.
        read: the paths of the trainable variables the pass read.
    """

    outputs: list
    layers: list
    read: set


def _path(layer) -> str:
    return getattr(layer, "path", None) or layer.name


def _numpy(value) -> list:
    found = []
    for leaf in tf.nest.flatten(value):
        if isinstance(leaf, (tf.Tensor, np.ndarray)) or hasattr(leaf, "numpy"):
            with contextlib.suppress(Exception):
                found.append(np.asarray(leaf))
    return found


def forward(model: keras.Model, x, *, training: bool = False, models_only: bool = False,
            layers: bool = True, reads: bool = True) -> Seen:
    """Runs `model(x, training=training)` eagerly, recording layer outputs and variable reads.

    What a pass records is what it holds: every layer's outputs (`layers`)
    are a copy of the pass's activations, and the variable reads (`reads`)
    come from a gradient tape, which holds what a backward pass would need.
    A check that compares outputs first asks for neither (ResNet50, 32
    examples: ~300 MB less at the first step's peak) and records layers only
    to name the layer at fault.

    Args:
        model: a Keras model with a `call`.
        x: one batch of inputs.
        training: the mode asked of the model. Defaults to `False`.
        models_only: record the outputs of nested models only (embeddings), not of
            every layer: fewer taps for a check run at every epoch end. Defaults to `False`.
        layers: record layer outputs (`Seen.layers`; else empty). Defaults to `True`.
        reads: record the trainable variables read (`Seen.read`; else empty). Defaults to `True`.

    Returns:
        A `Seen`.

    Raises:
        Exception: whatever the model's `call` raises (a model without `call`:
            `NotImplementedError`).
    """
    tapped = keras_compat.nested_layers(model) if layers else []
    if models_only:
        tapped = [layer for layer in tapped if isinstance(layer, keras.Model)]
    added = taps.install(tapped)
    try:
        kwargs = {"training": training} if keras_compat.call_has_training_arg(model) else {}
        with (taps.recording() if layers else contextlib.nullcontext()) as tape, \
                (tf.GradientTape() if reads else contextlib.nullcontext()) as gradient_tape:
            outputs = call(model, x, **kwargs)
        watched = {id(v) for v in gradient_tape.watched_variables()} if reads else set()
        del gradient_tape
    finally:
        taps.uninstall(added)
    read = {v.path for v in model.trainable_variables if id(getattr(v, "value", v)) in watched}
    recorded = [LayerOutput(_path(layer), type(layer).__name__, isinstance(layer, keras.Model),
                            _numpy(out)) for layer, out in tape.records] if layers else []
    return Seen(outputs=_numpy(outputs), layers=recorded, read=read)


__all__ = ["LayerOutput", "Seen", "forward"]
