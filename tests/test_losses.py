"""The one loss vocabulary (`tfguard._losses`): every spelling of a Keras loss gets the kind lint gives it."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import tfguard._losses
from tfguard._losses import (
    KINDS,
    MISMATCH_RULES,
    described_loss,
    keras_loss,
    kind_of,
    output_mismatches,
)
from tfguard.lint._losses import resolve_loss

#: Every loss name `keras.losses.get` accepts that tfguard has a kind for, in each spelling.
SPELLINGS = [
    "categorical_crossentropy", "CategoricalCrossentropy", "categorical_focal_crossentropy",
    "CategoricalFocalCrossentropy", "sparse_categorical_crossentropy",
    "SparseCategoricalCrossentropy", "binary_crossentropy", "BinaryCrossentropy", "bce", "BCE",
    "binary_focal_crossentropy", "BinaryFocalCrossentropy", "kl_divergence", "KLDivergence", "kld",
    "KLD", "mean_squared_error", "MeanSquaredError", "mse", "MSE", "mean_absolute_error", "mae",
    "MAE", "mean_absolute_percentage_error", "mape", "mean_squared_logarithmic_error", "msle",
    "huber", "Huber", "log_cosh", "LogCosh", "hinge", "Hinge", "squared_hinge", "SquaredHinge",
    "categorical_hinge", "CategoricalHinge",
]


@pytest.mark.parametrize("name", SPELLINGS)
def test_a_name_gets_the_kind_lint_gives_the_live_loss(name):
    live = resolve_loss(name)
    assert kind_of(name) == live.kind != "unknown"
    assert keras_loss(name).name == live.name
    assert getattr(keras.losses, keras_loss(name).cls)().name  # the class exists in keras.losses


def test_kinds_of_what_is_not_a_keras_loss():
    assert [kind_of(n) for n in (None, "crossentropy", "CE", "poisson", "my_loss")] == [
        "none", "auto_crossentropy", "auto_crossentropy", "unknown", "unknown"]
    assert keras_loss("sigmoid_cross_entropy_with_logits_v2").logits_only
    assert set(KINDS) >= {rule_kind for rule in MISMATCH_RULES for rule_kind in rule.kinds or ()}


@pytest.mark.parametrize("entry, expected", [
    # written since the kind is recorded: the kind wins over a custom loss's name
    ({"name": "mse", "class": "MyLoss", "from_logits": None, "kind": "unknown"},
     ("mse", "unknown", None)),
    # older event files: no kind, read from the name, then the class
    ({"name": "sparse_categorical_crossentropy", "class": "str", "from_logits": False},
     ("sparse_categorical_crossentropy", "sparse_categorical", False)),
    ({"name": "my_loss", "class": "SparseCategoricalCrossentropy", "from_logits": True},
     ("my_loss", "sparse_categorical", True)),
    ({"class": "BinaryCrossentropy", "from_logits": False}, ("binary_crossentropy", "binary", False)),
    ({"name": None, "class": None, "from_logits": None}, (None, "none", None)),
    ("KLDivergence", ("kl_divergence", "divergence", None)),
    # a function of the user's is Keras's only by Keras's own function name
    ({"name": "ce", "class": "function", "from_logits": None}, ("ce", "unknown", None)),
    ({"name": "binary_crossentropy", "class": "function", "from_logits": False},
     ("binary_crossentropy", "binary", False)),
    (None, (None, "none", None)),
])
def test_described_loss_reads_new_and_old_descriptions(entry, expected):
    loss = described_loss(entry)
    assert (loss.name, loss.kind, loss.from_logits) == expected


def test_the_docstring_table_lists_every_rule_with_its_severity():
    doc = tfguard._losses.__doc__
    for rule in MISMATCH_RULES:
        assert f"| `{rule.code}` | {rule.severity} |" in doc, rule.code


def test_a_guessed_activation_turns_errors_into_warnings():
    (sure,) = output_mismatches("mse", "regression", None, "softmax", 1, "layer")
    (guess,) = output_mismatches("mse", "regression", None, "softmax", 1, "last_layer")
    assert (sure.code, sure.severity) == (guess.code, "error") and guess.severity == "warning"
    assert "unbuilt" in guess.message
    assert output_mismatches("sparse_categorical_crossentropy", "sparse_categorical", False,
                             None, 3) == []  # an activation that could not be read


def test_why_a_relu_output_under_a_probability_loss_is_an_error():
    """A ReLU row of zeros (every unit off) is a NaN categorical cross-entropy: not a weaker loss, none."""
    one_hot = np.array([[0.0, 1.0, 0.0]], "float32")
    relu_row = np.zeros((1, 3), "float32")
    loss = keras.losses.categorical_crossentropy(one_hot, relu_row)
    assert np.isnan(keras.ops.convert_to_numpy(loss)).all()
    (mismatch,) = output_mismatches("categorical_crossentropy", "categorical", False, "relu", 3)
    assert (mismatch.code, mismatch.severity) == ("relu_output_into_probability_loss", "error")
