"""The models users bring, for the benchmarks at scale (`memory.py`, `depth.py`).

* `mlp_wide(params)`: three `Dense` layers of one width, about `params`
  weights (50 M: width 4096);
* `mlp_deep(depth)`: `depth` `Dense(32, relu)` layers, a
  `BatchNormalization` after every fourth, a 10-way softmax;
* `resnet50()`: `keras.applications.ResNet50(weights=None)` on 64x64x3, 10 classes.

Each is compiled with Adam and `sparse_categorical_crossentropy`, and comes
with a `tf.data` pipeline of random data (`dataset(model, steps, batch)`).

Example:

>>> model = mlp_deep(4)
>>> len([layer for layer in model.layers if isinstance(layer, keras.layers.Dense)])
5
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf


def mlp_wide(params: int = 50_000_000) -> keras.Model:
    """Input -> Dense(w, relu) -> Dense(w, relu) -> Dense(w) logits over w classes, 3 w^2 ~ `params`."""
    keras.utils.set_random_seed(0)
    width = int(math.sqrt(params / 3))
    inputs = keras.Input((width,))
    h = keras.layers.Dense(width, activation="relu", name="dense_0")(inputs)
    h = keras.layers.Dense(width, activation="relu", name="dense_1")(h)
    outputs = keras.layers.Dense(width, name="logits")(h)
    model = keras.Model(inputs, outputs, name=f"mlp_{params // 1_000_000}m")
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def mlp_deep(depth: int = 200, width: int = 32) -> keras.Model:
    """`depth` Dense(width, relu) layers with a BatchNormalization after every fourth, then softmax."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((width,))
    h = inputs
    for i in range(depth):
        h = keras.layers.Dense(width, activation="relu")(h)
        if i % 4 == 3:
            h = keras.layers.BatchNormalization()(h)
    outputs = keras.layers.Dense(10, activation="softmax")(h)
    model = keras.Model(inputs, outputs, name=f"mlp_deep_{depth}")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def resnet50() -> keras.Model:
    """`keras.applications.ResNet50(weights=None)` on 64x64x3 inputs, 10 classes."""
    keras.utils.set_random_seed(0)
    model = keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


MODELS = {"mlp50m": lambda: mlp_wide(50_000_000), "mlp100m": lambda: mlp_wide(100_000_000),
          "resnet50": resnet50, "mlp_deep100": lambda: mlp_deep(100), "mlp_deep200": lambda: mlp_deep(200)}


def dataset(model: keras.Model, steps: int, batch: int) -> tf.data.Dataset:
    """`steps` batches of random inputs and class ids for `model`, cached in memory."""
    rng = np.random.default_rng(1)
    shape = tuple(model.inputs[0].shape[1:])
    classes = model.outputs[0].shape[-1]
    x = rng.random((steps * batch, *shape), dtype=np.float32)
    y = rng.integers(0, classes, steps * batch).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).cache()


__all__ = ["MODELS", "dataset", "mlp_deep", "mlp_wide", "resnet50"]
