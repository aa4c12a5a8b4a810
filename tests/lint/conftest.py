"""Real Keras models and real data shared by the lint tests."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402


@pytest.fixture
def seq():
    """Builds a Sequential model on an `Input(input_shape)` (default `(4,)`)."""

    def build(*layers, input_shape=(4,)):
        return keras.Sequential([keras.Input(input_shape), *layers])

    return build


@pytest.fixture(scope="session")
def digits():
    """sklearn's real 8x8 handwritten digits: x in [0, 16] (1797, 64), y in 0..9."""
    data = load_digits()
    return data.data.astype("float32"), data.target.astype("int64")


@pytest.fixture
def rng():
    return np.random.default_rng(0)
