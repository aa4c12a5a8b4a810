"""`tfguard lint` and the diagnosis judge a model's loss and output alike (issue 43, item 4).

Lint reads the live model (`lint_model`), the diagnosis the model
description the Logger writes (`describe_model`, stored as JSON in the run's
event file); both apply the one rule table `tfguard._losses.MISMATCH_RULES`.
Every row of that table is reached by a real compiled Keras model below, and
each model gets the same codes and severities from both: from a fresh
description, from one written before the description carried the loss's
kind (an older event file), and, for the model the two used to disagree on,
from a real event file.
"""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

from tfguard._losses import MISMATCH_RULES
from tfguard.diagnose import Signals, Thresholds, diagnose_logdir
from tfguard.diagnose._rules.contract import loss_activation_mismatch
from tfguard.lint._describe import describe_model
from tfguard.lint._model_lint import lint_model
from tfguard.summary import Logger

L = keras.layers
SCCE_LOGITS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
CCE_LOGITS = keras.losses.CategoricalCrossentropy(from_logits=True)
BCE_LOGITS = keras.losses.BinaryCrossentropy(from_logits=True)

#: (output activation, units, loss, the (code, severity) pairs both must report).
MODELS = [
    ("relu", 3, "sparse_categorical_crossentropy", {("relu_output_into_probability_loss", "error")}),
    ("relu", 3, "categorical_crossentropy", {("relu_output_into_probability_loss", "error")}),
    ("relu", 1, "binary_crossentropy", {("relu_output_into_probability_loss", "error")}),
    ("relu", 3, SCCE_LOGITS, {("relu_logits", "warning")}),
    ("relu", 1, BCE_LOGITS, {("relu_logits", "warning")}),
    ("linear", 3, "sparse_categorical_crossentropy", {("logits_without_from_logits", "error")}),
    ("linear", 3, "categorical_crossentropy", {("logits_without_from_logits", "error")}),
    ("linear", 1, "binary_crossentropy", {("logits_without_from_logits", "error")}),
    ("log_softmax", 3, "sparse_categorical_crossentropy", {("logits_without_from_logits", "error")}),
    ("linear", 3, SCCE_LOGITS, set()),
    ("linear", 3, CCE_LOGITS, set()),
    ("linear", 1, BCE_LOGITS, set()),
    ("softmax", 3, SCCE_LOGITS, {("softmax_with_from_logits", "warning")}),
    ("softmax", 3, CCE_LOGITS, {("softmax_with_from_logits", "warning")}),
    ("softmax", 4, BCE_LOGITS, {("softmax_with_from_logits", "warning"),
                                ("softmax_with_binary_crossentropy", "warning")}),
    ("softmax", 3, "sparse_categorical_crossentropy", set()),
    ("softmax", 3, "categorical_crossentropy", set()),
    ("softmax", 1, "binary_crossentropy", {("softmax_single_unit", "error")}),
    ("softmax", 4, "binary_crossentropy", {("softmax_with_binary_crossentropy", "warning")}),
    ("sigmoid", 1, BCE_LOGITS, {("sigmoid_with_from_logits", "warning")}),
    ("sigmoid", 1, "binary_crossentropy", set()),
    ("sigmoid", 5, "binary_crossentropy", set()),  # multi-label
    ("sigmoid", 4, "categorical_crossentropy", {("sigmoid_with_categorical_crossentropy", "warning")}),
    ("sigmoid", 1, "sparse_categorical_crossentropy", {("categorical_loss_single_unit", "error")}),
    ("tanh", 3, "categorical_crossentropy", {("tanh_output_into_probability_loss", "error")}),
    ("tanh", 3, CCE_LOGITS, {("bounded_logits", "warning")}),
    ("softmax", 4, "mse", {("regression_loss_on_classifier", "info")}),
    ("linear", 1, "mse", set()),
    ("sigmoid", 1, "hinge", {("nonnegative_output_into_hinge", "warning")}),
    ("relu", 1, "squared_hinge", {("nonnegative_output_into_hinge", "warning")}),
    ("tanh", 1, "hinge", set()),
    ("linear", 1, "hinge", set()),
    ("softmax", 3, "categorical_hinge", set()),
    ("linear", 3, "kld", {("logits_without_from_logits", "error")}),
    ("relu", 3, keras.losses.KLDivergence(), {("relu_output_into_probability_loss", "error")}),
    ("softmax", 3, "kld", set()),
    ("sigmoid", 1, "crossentropy", set()),
    ("linear", 3, "crossentropy", {("logits_without_from_logits", "error")}),
]


def _model(activation, units, loss):
    model = keras.Sequential([keras.Input((4,)), L.Dense(8, activation="relu"),
                              L.Dense(units, activation=activation, name="out")])
    model.compile(optimizer="adam", loss=loss)
    return model


def _judged(findings) -> set:
    return {(f.code, f.severity) for f in findings}


def _diagnosed(description: dict) -> set:
    return _judged(loss_activation_mismatch(Signals(model=description), Thresholds()))


def test_every_rule_of_the_table_is_reached():
    reached = {code for *_, expected in MODELS for code, _ in expected}
    assert reached == {rule.code for rule in MISMATCH_RULES}


@pytest.mark.parametrize("activation, units, loss, expected", MODELS,
                         ids=[f"{act}{units}-{getattr(loss, 'name', loss)}" for act, units, loss, _ in MODELS])
def test_lint_and_diagnosis_give_the_same_codes_and_severities(activation, units, loss, expected):
    model = _model(activation, units, loss)
    description = json.loads(json.dumps(describe_model(model)))
    assert _judged(lint_model(model)) == expected
    assert _diagnosed(description) == expected
    # an event file written before the description carried the kind reads the same
    older = {**description, "loss": {k: v for k, v in description["loss"].items() if k != "kind"}}
    assert _diagnosed(older) == expected


def test_each_output_of_a_multi_output_model_is_judged_alike():
    inputs = keras.Input((4,))
    hidden = L.Dense(8, activation="relu")(inputs)
    model = keras.Model(inputs, [L.Dense(3, activation="softmax", name="cls")(hidden),
                                 L.Dense(1, name="score")(hidden)])
    model.compile(loss=[SCCE_LOGITS, "binary_crossentropy"])
    expected = {("softmax_with_from_logits", "warning"), ("logits_without_from_logits", "error")}
    assert _judged(lint_model(model)) == expected
    findings = loss_activation_mismatch(Signals(model=describe_model(model)), Thresholds())
    assert {(f.where, f.code) for f in findings} == {("cls", "softmax_with_from_logits"),
                                                     ("score", "logits_without_from_logits")}


def test_a_relu_output_under_a_probability_loss_is_an_error_in_the_run_diagnosis_too(tmp_path):
    """The model lint and diagnosis disagreed on (an error against a warning), through an event file."""
    keras.utils.set_random_seed(0)
    model = _model("relu", 3, "sparse_categorical_crossentropy")
    x = np.random.default_rng(0).random((32, 4)).astype("float32")
    model.fit(x, np.arange(32) % 3, batch_size=8, epochs=2, verbose=0,
              callbacks=[Logger(str(tmp_path), scalars_every=1, histograms_every=0)])
    (linted,) = lint_model(model)
    (diagnosis,) = diagnose_logdir(str(tmp_path))
    (found,) = [f for f in diagnosis.findings if f.id == "loss_activation_mismatch"]
    assert (found.code, found.severity) == (linted.code, linted.severity) == (
        "relu_output_into_probability_loss", "error")
    assert found.message == linted.message and found.suggestion == linted.suggestion
