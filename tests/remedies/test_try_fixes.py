"""Trials on small programs with one injected problem each: the right remedy is a fix, a useless one is not.

Each program trains a tiny model for a few epochs on scikit-learn's real
digits (shipped offline), built in the test; `try_fixes` runs it once
attached, diagnoses it, and re-runs it per remedy.
"""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
from sklearn.datasets import load_digits

from tfguard.remedies import Remedy, _edits, try_fixes


@pytest.fixture(scope="module")
def digits():
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))[:600]
    return x[order].astype("float32"), y[order].astype("int64")


def _mlp():
    return keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                             keras.layers.Dense(10, activation="softmax")])


def test_raw_pixels_get_normalized_and_the_trial_is_a_fix(digits, tmp_path):
    x, y = digits

    def train():  # the mistake: raw 0..256 pixels straight into the model
        model = _mlp()
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy")
        model.fit(x * 16, y, epochs=3, batch_size=32, validation_split=0.2, verbose=0)

    lines = []
    result = try_fixes(train, logdir=tmp_path, progress=lines.append)
    assert "unnormalized_input" in [f.id for f in result.findings]
    trial = next(t for t in result if t.remedy == "normalize_input")
    assert trial.fix and trial.verdict == "improved"
    assert trial.measure == "val_loss" and trial.after < 0.95 * trial.before
    assert trial.change.startswith("add keras.layers.Normalization() adapted on the training data")
    assert len(trial.curves["before"]["val_loss"]) == len(trial.curves["after"]["val_loss"]) == 3
    assert (tmp_path / "original").is_dir() and trial.run_dir.startswith(str(tmp_path / "try-"))
    json.dumps(result.to_json(), allow_nan=False)
    assert any("normalization" in line.lower() for line in lines)


def test_a_useless_remedy_is_reported_as_no_better_never_as_a_fix(digits):
    x, y = digits

    def train():
        model = _mlp()
        model.compile(optimizer=keras.optimizers.Adam(1e-7), loss="sparse_categorical_crossentropy")
        model.fit(x[:256] / 16, y[:256], epochs=1, batch_size=64, validation_split=0.25, verbose=0)

    useless = Remedy("clipnorm_huge", "learning_rate", "clipnorm=1e9 (clips nothing)",
                     on_compile=lambda state, model, arguments: state.changed(
                         _edits.set_clipnorm(arguments["optimizer"], 1e9)[1]))
    [trial] = try_fixes(train, findings=[], remedies=[useless])
    assert trial.verdict == "no better" and not trial.fix
    assert trial.change == "Adam(clipnorm=1000000000.0)"
    assert abs(trial.after - trial.before) < 0.05 * trial.before


def test_labels_one_to_ten_are_remapped_and_both_models_rescored(digits):
    x, y = digits

    def train():  # the mistake: class ids 1..10 for a 10-unit softmax
        model = _mlp()
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x / 16, y + 1, epochs=3, batch_size=32, verbose=0)

    result = try_fixes(train)
    trial = next(t for t in result if t.remedy == "label_remap")
    assert trial.change == "labels {1, 2, …, 10} → {0, 1, …, 9} before fit"
    assert trial.measure == "loss (rescored)" and trial.fix


def test_train_must_build_a_new_model_each_call(digits):
    from tfguard._errors import ContractError

    x, y = digits
    model = _mlp()

    def train():
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(x[:64] / 16, y[:64], epochs=1, verbose=0)

    noop = Remedy("noop", "no_learning", "nothing", on_fit=lambda s, m, a: s.changed("nothing"))
    with pytest.raises(ContractError, match="builds and compiles a new model each time"):
        try_fixes(train, findings=[], remedies=[noop])
