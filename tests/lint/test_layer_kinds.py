"""The pass-through layers, listed once: the head check and the front check agree on them."""

from __future__ import annotations

import keras
import pytest

from tfguard.lint._front import front_of_model
from tfguard.lint._heads import output_heads
from tfguard.lint._layer_kinds import PASS_THROUGH_LAYERS, SCALE_PRESERVING_LAYERS


def _layer(name: str):
    layer = getattr(keras.layers, name)
    return layer(0.1) if "Dropout" in name or "Noise" in name else layer()


# AlphaDropout and ActivityRegularization were pass-through for the head check only
@pytest.mark.parametrize("name", ["Identity", "Dropout", "GaussianNoise", "GaussianDropout",
                                  "AlphaDropout", "ActivityRegularization", "Flatten"])
def test_each_pass_through_layer_is_looked_past_by_both_checks(name):
    assert name in PASS_THROUGH_LAYERS
    model = keras.Sequential([keras.Input((4,)), keras.layers.Rescaling(0.5, name="scale"),
                              keras.layers.Dense(3, activation="softmax", name="probs"), _layer(name)])
    head = output_heads(model)[0]
    assert (head.activation, head.layer) == ("softmax", "probs")
    front = keras.Sequential([keras.Input((4,)), _layer(name), keras.layers.Rescaling(0.5, name="scale"),
                              keras.layers.Dense(1)])
    kind, found = front_of_model(front)
    assert (kind, found.name) == ("normalized", "scale")


def test_scale_preserving_layers_include_every_pass_through_layer():
    assert PASS_THROUGH_LAYERS <= SCALE_PRESERVING_LAYERS
    assert "Resizing" in SCALE_PRESERVING_LAYERS and "Resizing" not in PASS_THROUGH_LAYERS
