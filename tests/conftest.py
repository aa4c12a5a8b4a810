"""Shared fixtures: small real Keras models and data, made in the tests."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


def deep_mlp(depth: int, width: int = 8):
    """A compiled MLP of `depth` ReLU Dense layers, a BatchNormalization after every fourth, three logits."""
    layers = [keras.Input((width,))]
    for i in range(depth):
        layers.append(keras.layers.Dense(width, activation="relu"))
        if i % 4 == 3:
            layers.append(keras.layers.BatchNormalization())
    model = keras.Sequential([*layers, keras.layers.Dense(3)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def small_classifier(units: int = 3, inputs: int = 4, hidden: int = 8, jit_compile=False, lr=1e-2):
    """A compiled two-layer softmax classifier."""
    model = keras.Sequential(
        [
            keras.Input((inputs,)),
            keras.layers.Dense(hidden, activation="relu", name="hidden"),
            keras.layers.Dense(units, activation="softmax", name="out"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(lr),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    return model


@pytest.fixture
def classifier():
    keras.utils.set_random_seed(0)
    return small_classifier()


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    x = rng.random((64, 4), dtype=np.float32)
    y = (np.arange(64) % 3).astype("int64")
    return x, y


def weights_of(model):
    return [np.array(v.numpy()) for v in model.weights]


def optimizer_state(model):
    return [np.array(v.numpy()) for v in model.optimizer.variables]
