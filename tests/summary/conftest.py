"""Fixtures of the summary tests: a tiny real CNN and image-like data."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


def tiny_cnn(name: str = "tiny", lr=1e-2) -> keras.Model:
    """Conv(relu) -> Flatten -> Dense(tanh) -> Dense(softmax), compiled with Adam."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
            keras.layers.Flatten(name="flat"),
            keras.layers.Dense(8, activation="tanh", name="hidden"),
            keras.layers.Dense(3, activation="softmax", name="out"),
        ],
        name=name,
    )
    model.compile(optimizer=keras.optimizers.Adam(lr), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


@pytest.fixture
def cnn():
    return tiny_cnn()


@pytest.fixture
def images():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 8, 8, 1)).astype("float32")
    y = (np.arange(48) % 3).astype("int64")
    return x, y


@pytest.fixture(autouse=True)
def signal_handlers_restored():
    """Every test leaves SIGTERM and SIGINT handled as before (the Logger restores them)."""
    import signal

    before = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))
    yield
    after = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))
    for previous, now in zip(before, after):
        if now != previous:
            signal.signal(signal.SIGTERM, before[0])
            signal.signal(signal.SIGINT, before[1])
            raise AssertionError(f"a signal handler was left installed: {now!r}")
