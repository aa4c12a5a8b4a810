"""A hand-written loss that rewards outputs outside the labels' range (issue 41, public bug d4ml-005).

A linear output fed to a clipped binary cross-entropy written by hand: `1 - p` above 1 makes the
loss negative, training pushes the output below 0 and the accuracy stays at chance. The loss is a
function tfguard cannot read, so the check asks it (`tfguard.invariants._loss_domain`); a loss
negative by design (cosine similarity) and losses on scores (from_logits, hinge) stay quiet.
"""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest

from tfguard import _tags
from tfguard.invariants._loss_domain import domain_read

from . import user_programs as U

ALARMS = ("warning", "error")

_CLIPPED_CE = """
    from keras import ops
    x = (digits_x / 4.0).astype("float32")  # 0..4
    y = keras.utils.to_categorical(digits_y, 10)
    def cost(y_true, y_pred):  # a binary cross-entropy by hand, clipped against log(0)
        return -ops.mean(y_true * ops.log(ops.clip(y_pred, 1e-10, float("inf")))
                         + (1 - y_true) * ops.log(ops.clip(1 - y_pred, 1e-10, float("inf"))))
    init = keras.initializers.TruncatedNormal(stddev=0.1)
"""


def _clipped_ce(output: str, hidden_bias: float = 0.0) -> U.UserProgram:
    return U.UserProgram(f"clipped_ce_{output}_{hidden_bias}", None, _CLIPPED_CE + f"""
    model = keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(64, activation="relu", kernel_initializer=init,
                           bias_initializer=keras.initializers.Constant({hidden_bias})),
        keras.layers.Dense(10, activation={output!r}, kernel_initializer=init, name="scores")])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=cost, metrics=["accuracy"])
    model.fit(x, y, batch_size=32, epochs=3, verbose=0)
""")


def _run(program: U.UserProgram, tmp_path):
    result = U.run(program, tmp_path)
    assert result.exit_code == 0, result.traceback
    (diagnosis,) = result.diagnoses
    records = [json.loads(t) for _, t in diagnosis.signals.texts.get(_tags.INVARIANT_RECORDS, [])]
    alarms = [f for f in diagnosis.findings if f.severity in ALARMS]
    return alarms, [r for r in records if r["check"] == "loss_domain"]


def test_a_linear_output_under_a_hand_written_cross_entropy_is_named_first(tmp_path):
    # before: no finding at all; the training loss went negative (d4ml-005: -1.58)
    alarms, _ = _run(_clipped_ce("linear"), tmp_path)
    assert alarms, "no finding"
    first = alarms[0]
    assert (first.id, first.severity, first.where) == ("loss_activation_mismatch", "error", "scores"), \
        [(f.id, f.message) for f in alarms]
    assert first.evidence["code"] == "loss_rewards_out_of_range"
    assert first.evidence["loss"] < first.evidence["best_in_range"] == 0.0
    assert first.evidence["prediction_max"] < 0.0 and first.evidence["outside_fraction"] == 1.0
    assert "lower than any prediction inside the labels' range [0, 1]" in first.message
    assert "the training loss reached -" in first.message
    assert "activation='sigmoid'" in first.suggestion


def test_the_same_loss_on_a_softmax_output_stays_quiet(tmp_path):
    alarms, records = _run(_clipped_ce("softmax"), tmp_path)
    assert alarms == [], [(f.id, f.message) for f in alarms]
    assert records and all(r["ok"] is True for r in records)
    assert records[0]["evidence"]["outside_fraction"] == 0.0


def test_a_dead_network_under_the_same_loss_is_not_blamed_on_the_loss(tmp_path):
    # every hidden unit dead from the start (bias -50): the softmax output is the same for every
    # input and inside [0, 1]; the loss is not what is wrong
    alarms, records = _run(_clipped_ce("softmax", hidden_bias=-50.0), tmp_path)
    assert "loss_activation_mismatch" not in [f.id for f in alarms], [(f.id, f.message) for f in alarms]
    assert records and all(r["ok"] is not False for r in records)


def test_cosine_similarity_is_negative_by_design_and_stays_quiet(tmp_path):
    program = U.UserProgram("cosine_linear", None, """
        x = (digits_x / 16.0).astype("float32")
        y = keras.utils.to_categorical(digits_y, 10)
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"),
                                  keras.layers.Dense(10)])
        model.compile(optimizer="adam", loss="cosine_similarity")
        model.fit(x, y, batch_size=32, epochs=3, verbose=0)
    """)
    alarms, records = _run(program, tmp_path)
    assert "loss_activation_mismatch" not in [f.id for f in alarms], [(f.id, f.message) for f in alarms]
    assert records and records[0]["ok"] is True and records[0]["evidence"]["loss"] < 0
    assert records[0]["evidence"]["loss_at_labels"] == pytest.approx(-1.0, abs=1e-3)  # its minimum


# -- the check itself, on fitted models (no tfguard run) ------------------------------------------
def _fitted(loss, units: int, y: np.ndarray, seed: int = 0) -> tuple[keras.Model, np.ndarray]:
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(256, 8)).astype("float32")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(units)])
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss=loss)
    model.fit(x, y(x), batch_size=32, epochs=4, verbose=0)
    return model, x


def _binary(x):
    return (x[:, :1] > 0).astype("float32")


@pytest.mark.parametrize("loss", [keras.losses.BinaryCrossentropy(from_logits=True), "hinge"],
                         ids=["bce_from_logits", "hinge"])
def test_a_loss_on_scores_levels_off_outside_the_range(loss):
    # logits far outside [0, 1] score below the labels themselves, yet the loss is bounded below
    model, x = _fitted(loss, 1, _binary)
    record = domain_read(model, x[:32], _binary(x[:32]))
    assert record["ok"] is True, record
    assert record["evidence"]["loss"] < record["evidence"]["best_in_range"]
    assert "bounded below" in record["evidence"]["levels_off"]


def test_nan_predictions_or_one_label_decide_nothing():
    model, x = _fitted("mse", 1, _binary)
    assert domain_read(model, x[:32], np.ones((32, 1), "float32"))["ok"] is None  # no range
    kernel = model.layers[0].kernel
    kernel.assign(np.full(kernel.shape, np.nan, "float32"))
    record = domain_read(model, x[:32], _binary(x[:32]))
    assert record["ok"] is None and "not finite" in record["evidence"]["undecided"]


def test_sparse_class_ids_are_not_predictions_and_are_skipped():
    model, x = _fitted("sparse_categorical_crossentropy", 3, lambda x: (x[:, 0] > 0).astype("int64"))
    record = domain_read(model, x[:32], (x[:32, 0] > 0).astype("int64"))
    assert record["ok"] is True and "are not predictions" in record["evidence"]["skipped"]
