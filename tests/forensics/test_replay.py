"""Localization on replay: the four cases the firewall promises to name."""

import json
import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfguard
from tfguard import GuardViolation
from tfguard._errors import QuarantineError


@keras.saving.register_keras_serializable(package="tfguard_tests")
class LogLayer(keras.layers.Layer):
    """A custom layer computing log(x): log(0) = -inf."""

    def call(self, inputs):
        return tf.math.log(inputs)


@keras.saving.register_keras_serializable(package="tfguard_tests")
class RatioLayer(keras.layers.Layer):
    """Divides feature 0 by feature 1: the unsafe divide."""

    def call(self, inputs):
        return inputs[:, :1] / inputs[:, 1:2]


@keras.saving.register_keras_serializable(package="tfguard_tests")
class NaiveAttention(keras.layers.Layer):
    """Self-attention with a hand-written softmax: exp overflows on large scores."""

    def __init__(self, dim=8, **kwargs):
        super().__init__(**kwargs)
        self.dim = dim
        self.query = keras.layers.Dense(dim, name="query")
        self.key = keras.layers.Dense(dim, name="key")
        self.value = keras.layers.Dense(dim, name="value")

    def call(self, inputs):
        q, k, v = self.query(inputs), self.key(inputs), self.value(inputs)
        scores = tf.matmul(q, k, transpose_b=True)
        weights = tf.exp(scores) / tf.reduce_sum(tf.exp(scores), axis=-1, keepdims=True)
        return tf.matmul(weights, v)

    def get_config(self):
        return {**super().get_config(), "dim": self.dim}


def _fit_until_violation(model, x, y, tmp_path, batch_size=16, epochs=1):
    tfguard.guard(model, policy="raise", quarantine_dir=str(tmp_path))
    with pytest.raises(GuardViolation) as info:
        model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0)
    return info.value


def test_custom_layer_log_of_zero_names_layer_and_log_op(tmp_path):
    inputs = keras.Input((4,))
    h = keras.layers.Dense(4, activation="relu", name="features")(inputs)
    logged = LogLayer(name="log_features")(h)
    outputs = keras.layers.Dense(3, activation="softmax", name="out")(logged)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x = np.random.default_rng(0).random((32, 4), dtype=np.float32)
    error = _fit_until_violation(model, x, np.arange(32) % 3, tmp_path)
    assert "First non-finite layer on replay: 'log_features'" in str(error)
    assert "First op producing NaN/Inf: Log" in str(error)
    report = tfguard.replay(error.quarantine)  # from the saved model.keras, safe_mode
    assert report.first_layer == "log_features" and report.op_type == "Log"


def test_division_by_zero_names_the_divide(tmp_path):
    inputs = keras.Input((2,))
    ratio = RatioLayer(name="ratio")(inputs)
    outputs = keras.layers.Dense(1, name="out")(ratio)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((16, 2), np.float32)
    x[7, 1] = 0.0
    error = _fit_until_violation(model, x, np.zeros((16, 1), np.float32), tmp_path)
    report = tfguard.replay(error.quarantine, model=model)
    assert report.first_layer == "ratio"
    assert report.op_type == "RealDiv"


def test_softmax_overflow_in_attention_names_the_block_and_exp(tmp_path):
    keras.utils.set_random_seed(1)
    inputs = keras.Input((5, 8))
    attended = NaiveAttention(name="attention")(inputs)
    pooled = keras.layers.GlobalAveragePooling1D(name="pool")(attended)
    outputs = keras.layers.Dense(2, activation="softmax", name="out")(pooled)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x = np.random.default_rng(0).normal(size=(16, 5, 8)).astype(np.float32) * 200.0
    error = _fit_until_violation(model, x, np.arange(16) % 2, tmp_path)
    report = tfguard.replay(error.quarantine, model=model)
    assert report.first_layer == "attention"
    assert report.op_type == "Exp"


def test_exploding_learning_rate_is_stopped_before_the_weights_are_poisoned(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(16, activation="relu", name="hidden"),
            keras.layers.Dense(1, name="out"),
        ]
    )
    model.compile(optimizer=keras.optimizers.SGD(1e6), loss="mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4)).astype(np.float32)
    y = rng.normal(size=(256, 1)).astype(np.float32)
    error = _fit_until_violation(model, x, y, tmp_path, epochs=50)
    # Two steps at this rate leave weights near 1e24: finite, so they were applied, and the
    # hidden activations (~1e24) are finite too; the output multiplies two such numbers and
    # overflows float32 (max ~3.4e38). The forward pass is the first stage to see it.
    assert error.stage == "forward"
    assert all(np.isfinite(v.numpy()).all() for v in model.weights)
    report = tfguard.replay(error.quarantine, model=model)
    assert report.step == error.step
    assert report.nonfinite_layers == ["out"] and report.first_layer == "out"
    assert report.op_type == "MatMul" and "Dense.call" in report.op_detail
    assert not np.isfinite(report.loss)
    # the message raised during training says what the replay says
    assert "First non-finite layer on replay: 'out'" in str(error)
    assert "First op producing NaN/Inf: MatMul" in str(error)


def test_replay_restores_the_model_weights(tmp_path):
    inputs = keras.Input((2,))
    outputs = keras.layers.Dense(1, name="out")(RatioLayer(name="ratio")(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((8, 2), np.float32)
    x[0, 1] = 0.0
    error = _fit_until_violation(model, x, np.zeros((8, 1), np.float32), tmp_path)
    before = [v.numpy().copy() for v in model.weights]
    tfguard.replay(error.quarantine, model=model)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.weights))


def test_quarantine_loads_without_pickle_and_rejects_bad_folders(tmp_path):
    with pytest.raises(QuarantineError, match="'meta.json' is missing"):
        tfguard.load_quarantine(str(tmp_path))
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1)(RatioLayer()(inputs)))
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((8, 2), np.float32)
    x[3, 1] = 0.0
    error = _fit_until_violation(model, x, np.zeros((8, 1), np.float32), tmp_path)
    quarantine = tfguard.load_quarantine(error.quarantine)
    assert quarantine.x.shape == (8, 2) and quarantine.y.shape == (8, 1)
    assert len(quarantine.weights) == len(model.weights)
    with open(os.path.join(error.quarantine, "meta.json")) as handle:
        meta = json.load(handle)
    assert meta["format"] == "tfguard.quarantine/1"


SCRIPT_LAYERS = '''
import keras
import tensorflow as tf


class ScriptLog(keras.layers.Layer):
    def call(self, inputs):
        return tf.math.log(inputs)


if __name__ == "__main__":
    raise SystemExit("training would start here")
'''


@pytest.fixture
def script_quarantine(tmp_path):
    """`(quarantine folder, script)`: a batch quarantined from a model whose layer lives in a script."""
    import importlib.util

    script = tmp_path / "train.py"
    script.write_text(SCRIPT_LAYERS)
    spec = importlib.util.spec_from_file_location("user_train_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    keras.utils.set_random_seed(0)
    inputs = keras.Input((2,))
    hidden = keras.layers.Dense(2, name="dense", kernel_initializer="identity")(inputs)
    model = keras.Model(inputs, module.ScriptLog(name="log")(hidden))
    model.compile(optimizer="sgd", loss="mse")
    tfguard.guard(model, policy="skip", quarantine_dir=str(tmp_path / "q"))
    x = -np.abs(np.random.default_rng(0).normal(size=(8, 2))).astype("float32")
    model.fit(x, np.zeros((8, 2), "float32"), batch_size=8, verbose=0)
    return tfguard.guard_events(model)[0].quarantine, script


def test_cli_replay_shows_the_stored_replay_and_re_runs_with_import(script_quarantine, capsys):
    from tfguard._cli import main
    from tfguard._forensics import StoredReplayWarning

    path, script = script_quarantine
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["replay", path]) == 0
    assert not [w for w in seen if issubclass(w.category, StoredReplayWarning)]  # its summary says it
    out = capsys.readouterr().out
    assert "Replayed with the live model when the batch was saved" in out
    assert "First non-finite layer on replay: 'log'" in out and "Log" in out
    assert f"tfguard replay {path} --import FILE.py" in out

    assert main(["replay", path, "--import", str(script), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["source"] == "replayed" and report["first_layer"] == "log" and report["op_type"] == "Log"


def test_python_replay_does_what_the_command_does(script_quarantine):
    from tfguard._forensics import StoredReplayWarning

    path, script = script_quarantine
    with pytest.warns(StoredReplayWarning, match="cannot be loaded here") as caught:
        report = tfguard.replay(path)  # the layer's class lives in the script: safe_mode cannot load it
    assert report.source == "stored" and report.path == path
    assert report.first_layer == "log" and report.op_type == "Log"
    assert "cannot be loaded with safe_mode=True" in report.load_error
    assert report.summary().startswith("Replayed with the live model when the batch was saved")
    assert "tfguard.replay(path, imports=['FILE.py'])" in str(caught[0].message)
    warned = str(caught[0].message)  # two lines, the load error's first line cut at a word
    assert warned.count("\n") <= 1 and len(warned) < 700  # report.load_error keeps the whole error

    rerun = tfguard.replay(path, imports=[str(script)])
    assert rerun.source == "replayed" and rerun.first_layer == "log" and rerun.op_type == "Log"

    os.remove(os.path.join(path, "replay.json"))  # nothing stored: the load error is the answer
    with pytest.raises(QuarantineError, match="cannot be loaded with safe_mode=True"):
        tfguard.replay(path)


def test_replay_json_is_strict_json(script_quarantine, capsys):
    from tfguard._cli import main

    path, script = script_quarantine
    assert main(["replay", path, "--import", str(script), "--json"]) == 0

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    report = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert report["first_layer"] == "log" and report["loss"] == "NaN"


def test_a_crafted_folder_is_refused_even_when_it_keeps_a_replay(script_quarantine, capsys):
    from tfguard._cli import main

    path, _script = script_quarantine
    meta_path = os.path.join(path, "meta.json")
    with open(meta_path) as handle:
        meta = json.load(handle)
    meta["model"]["file"] = "../../elsewhere/model.keras"
    with open(meta_path, "w") as handle:
        json.dump(meta, handle)
    assert os.path.isfile(os.path.join(path, "replay.json"))
    assert main(["replay", path]) == 2
    captured = capsys.readouterr()
    assert "points outside the quarantine folder" in captured.err
    assert "Replayed with the live model" not in captured.out
