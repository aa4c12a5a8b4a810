"""Issue 22, "diagnosis that earns trust": each item on a program of its shape, with a healthy twin.

The programs (`user_programs_trust.py`) run unmodified under `tfguard run`;
the rest are the rules on hand-made signals where a program would not add
anything (a threshold's two sides). The whole table of programs is printed
by `benchmarks/diagnosis_user_programs.py`.
"""

from __future__ import annotations

import io

import keras
import numpy as np
import pytest
from rich.console import Console

from tfguard._findings import Finding
from tfguard.diagnose import Signals, Thresholds, diagnose
from tfguard.diagnose._causes import by_measured_fix
from tfguard.diagnose._report.html_page import render_html
from tfguard.diagnose._report.terminal import render_run
from tfguard.diagnose._rules.activations import dead_relu
from tfguard.diagnose._rules.contract import loss_activation_mismatch
from tfguard.diagnose._rules.gradients import exploding_gradient
from tfguard.lint._lookup import input_uses

from . import user_programs as U
from . import user_programs_trust as T

ALARMS = ("warning", "error")
PROGRAMS = {p.name: p for p in T.HEALTHY + T.BUGGY}
TH = Thresholds()
STEPS = np.arange(1, 101)


def _alarms(result) -> list:
    return [f for d in result.diagnoses for f in d.findings if f.severity in ALARMS]


def _run(tmp_path, name):
    result = U.run(PROGRAMS[name], tmp_path)
    assert result.exit_code == 0, result.traceback
    return result


def _no_alarm(tmp_path, name):
    result = _run(tmp_path, name)
    assert result.diagnoses and _alarms(result) == [], [(f.id, f.message) for f in _alarms(result)]
    return result


def _first(tmp_path, name):
    """The program's alarms; the first is its cause, every later one is true of it and linked."""
    program = PROGRAMS[name]
    alarms = _alarms(_run(tmp_path, name))
    assert alarms and alarms[0].id == program.cause, [(f.id, f.severity) for f in alarms]
    for later in alarms[1:]:
        assert later.id in program.also or later.id == program.cause, later.id
    return alarms


# -- 1. ids into a custom embedding wrapper ----------------------------------------------------
class Positions(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.token = keras.layers.Embedding(50, 4)
        self.position = keras.layers.Embedding(6, 4)

    def call(self, x):
        return self.token(x) + self.position(keras.ops.arange(0, keras.ops.shape(x)[-1], 1))


class Wrapper(keras.layers.Layer):  # a wrapper of a wrapper: Embedding two levels down
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.inner = Positions()

    def call(self, x):
        return self.inner(x)


class OneHot(keras.layers.Layer):
    def call(self, x):
        return keras.ops.one_hot(keras.ops.cast(x, "int32"), 50)


def _model(layer, dtype="int32"):
    x = keras.Input((6,), dtype=dtype)
    return keras.Model(x, keras.layers.Dense(1)(keras.layers.Flatten()(layer(x))))


def test_what_the_model_does_with_an_input_at_any_depth():
    assert input_uses(_model(Positions())) == ["lookup"]
    assert input_uses(_model(Wrapper(), dtype="float32")) == ["lookup"]  # integer-valued floats
    assert input_uses(_model(OneHot())) == ["lookup"]
    assert input_uses(_model(keras.layers.Dense(4), dtype="float32")) == ["numeric"]
    assert input_uses(_model(keras.layers.Rescaling(1 / 255), dtype="float32")) == ["numeric"]


@pytest.mark.parametrize("name", ["token_position_embedding_wrapper", "nested_embedding_wrapper_subclassed"])
def test_token_ids_into_a_wrapper_are_no_unnormalized_input(tmp_path, name):
    _no_alarm(tmp_path, name)


def test_raw_pixels_into_a_wrapper_still_are(tmp_path):
    alarms = _first(tmp_path, "raw_pixels_into_dense_wrapper")
    assert "reach 256" in alarms[0].message or "256" in alarms[0].message


# -- 2. dead_relu: zero gradient entries are not dead units; layers named by their path --------
def test_zero_gradient_entries_of_a_wide_layer_while_the_run_improves_are_a_remark():
    model = {"name": "vae", "layers": [{"name": "dense", "class": "Dense", "activation": "relu"}]}
    falling = {"train/total_loss": (None, [60.0, 45.0, 40.0, 38.0, 37.0]),
               "zero_grad_fraction/decoder/dense": (STEPS, np.full(100, 0.77))}
    (f,) = dead_relu(Signals.from_arrays(falling, model=model), TH)
    assert (f.severity, f.where) == ("info", "decoder/dense")
    stalled = {**falling, "train/total_loss": (None, [60.0, 60.0, 60.1, 60.0, 60.0])}
    (f,) = dead_relu(Signals.from_arrays(stalled, model=model), TH)
    assert (f.severity, f.where) == ("warning", "decoder/dense")


@pytest.mark.slow
def test_vae_with_a_narrow_latent_and_a_wide_relu_decoder_is_healthy(tmp_path):
    result = _no_alarm(tmp_path, "vae_narrow_latent_wide_relu")
    assert all(d.status["state"] == "completed" for d in result.diagnoses)


def test_a_layer_dead_by_its_bias_is_still_reported(tmp_path):
    alarms = _first(tmp_path, "relu_layer_dead_by_bias")
    assert alarms[0].where.startswith("dense") and alarms[0].severity == "error"


# -- 3. exploding_gradient needs a run that is hurt ----------------------------------------------
def _growth(train_loss):
    norms = np.where(STEPS < 40, 0.01, 1.5)  # 150x its early median, then steady
    return Signals.from_arrays({"grad_norm/dense": (STEPS, norms), "train/loss": (None, train_loss),
                                "val/loss": (None, [1.0, 0.6, 0.4, 0.3])})


def test_a_gradient_growth_while_validation_improves_is_a_remark():
    (f,) = exploding_gradient(_growth([1.1, 0.7, 0.45, 0.3]), TH)
    assert f.severity == "info" and f.evidence["run_improving"] == 1
    (f,) = exploding_gradient(_growth([1.1, 1.2, 1.4, 1.3]), TH)
    assert f.severity == "warning"


# -- 4. a far too wide initializer ---------------------------------------------------------------
def test_a_far_too_wide_initializer_is_reported_with_the_layer_and_initializer(tmp_path):
    alarms = _first(tmp_path, "initializer_far_too_wide_cnn")
    first = alarms[0]
    assert first.where.startswith("conv2d") and first.evidence["code"] == "initialization"
    assert first.evidence["initializer"] == "RandomNormal(stddev=3)"
    assert "RandomNormal(stddev=3)" in first.message


def _init_signals(std, first_loss):
    model = {"loss": "sparse_categorical_crossentropy", "output_units": 10, "layers": [
        {"name": "conv", "activation": "relu",
         "initializer": {"text": "X", "class": "X", "std": std, "fan_in": 9}}]}
    return Signals.from_arrays({"batch/loss": ([1, 11, 21], [first_loss, 2.0, 1.5]),
                                "grad_norm/conv": ([1, 11, 21], [1.0, 1.0, 1.0])}, model=model)


def test_a_wide_initializer_without_harm_or_a_harm_without_a_wide_initializer_is_quiet():
    assert exploding_gradient(_init_signals(3.0, 14000.0), TH)[0].evidence["code"] == "initialization"
    assert exploding_gradient(_init_signals(3.0, 2.4), TH) == []  # wide, but the run is not hurt
    assert exploding_gradient(_init_signals(0.3, 14000.0), TH) == []  # Glorot-sized


# -- 5. a wrong loss for the task ------------------------------------------------------------------
def test_a_regression_loss_on_a_classifier_is_named_before_its_labels(tmp_path):
    alarms = _first(tmp_path, "mse_on_softmax_classifier")
    assert alarms[0].evidence["code"] == "regression_loss_on_classifier"
    labels = [f for f in alarms if f.id == "label_range"]
    assert labels and labels[0].cause == alarms[0].key


def _task(loss, act, units, low, high):
    model = {"loss": {"name": loss, "class": loss}, "output_units": units, "output_activation": act,
             "layers": [{"name": "out"}]}
    return Signals.from_arrays({"data/label_min": ([1, 2], [low, low]),
                                "data/label_max": ([1, 2], [high, high])}, model=model)


def test_the_loss_fits_the_task_the_targets_show():
    (f,) = loss_activation_mismatch(_task("binary_crossentropy", "sigmoid", 10, 0.0, 9.0), TH)
    assert f.evidence["code"] == "binary_loss_multiclass"
    (f,) = loss_activation_mismatch(_task("mse", "sigmoid", 1, -1.6, 2.5), TH)
    assert f.evidence["code"] == "output_range"
    # the healthy twins: a linear regression, one-hot targets under binary cross-entropy
    assert loss_activation_mismatch(_task("mse", "linear", 1, -1.6, 2.5), TH) == []
    assert loss_activation_mismatch(_task("binary_crossentropy", "sigmoid", 10, 0.0, 1.0), TH) == []


# -- 6. exploding gradients before the NaN -----------------------------------------------------------
def test_the_growth_before_the_nan_comes_first_with_onset_layer_and_rate(tmp_path):
    alarms = _first(tmp_path, "deep_relu_init_goes_nan")
    first = alarms[0]
    assert first.id == "exploding_gradient" and first.where.startswith("dense")
    assert first.evidence["growth_per_step"] > 10 and first.evidence["growth_from_step"] == 1
    assert "per step" in first.message
    nan = [f for f in alarms if f.id == "nonfinite"]
    assert nan and nan[0].cause == first.key and nan[0].onset_step > first.onset_step


def test_a_nan_out_of_nowhere_is_no_explosion():
    s = Signals.from_arrays({"grad_norm/dense": ([1, 2, 3, 4], [1.0, 1.1, 0.9, np.nan]),
                             "batch/loss": ([1, 2, 3, 4], [2.3, 2.2, 2.1, np.nan])})
    d = diagnose(s)
    assert d.ids == ["nonfinite"]
    grown = Signals.from_arrays({"grad_norm/dense": ([1, 2, 3, 4], [1.0, 30.0, 900.0, np.nan]),
                                 "batch/loss": ([1, 2, 3, 4], [2.3, 2.2, 2.1, np.nan])})
    d = diagnose(grown)
    assert d.ids[:2] == ["exploding_gradient", "nonfinite"]
    assert d.findings[0].evidence["growth_per_step"] == pytest.approx(30.0)


# -- 7. healthy means the rules looked ---------------------------------------------------------------
def test_a_run_most_rules_could_not_read_has_little_evidence_never_healthy():
    d = diagnose(Signals.from_arrays({"train/d_loss": (None, [0.7, 0.6, 0.6, 0.5])}))
    assert d.status["state"] == "little_evidence" and not d.healthy
    assert "gradient norms" in d.status["missing"] and "little evidence" in d.status["text"]


def test_a_run_of_few_signals_has_little_evidence_though_loss_spike_reads_them():
    steps, ends = np.arange(1, 201), [50, 100, 150, 200]  # long enough for loss_spike to look
    batch = 1.0 / np.sqrt(steps) + 0.01 * np.sin(steps)
    epochs = batch[np.array(ends) - 1]
    d = diagnose(Signals.from_arrays({"batch/loss": (steps, batch), "grad_norm/global": (steps, 0 * steps + 0.5),
                                      "train/loss": (ends, epochs), "val/loss": (ends, epochs)}))
    assert "loss_spike" in d.rules_run
    assert d.status["state"] == "little_evidence" and not d.healthy


def test_little_evidence_is_what_the_reports_say():
    d = diagnose(Signals.from_arrays({"train/d_loss": (None, [0.7, 0.6, 0.6, 0.5])}))
    console = Console(record=True, width=300, file=io.StringIO())
    render_run(d, console)
    text = console.export_text()
    assert "little evidence" in text and "healthy" not in text.replace("not called healthy", "")
    assert "little evidence" in render_html([d])


def test_a_models_own_losses_are_judged_as_losses():
    flat = {"train/total_loss": (None, [45.2, 45.2, 45.2, 45.2, 45.2]),
            "train/kl_loss": (None, [0.0, 0.4, 0.9, 1.2, 1.4])}  # a KL term rises by design
    (f,) = diagnose(Signals.from_arrays(flat), rules=["no_learning"]).findings
    assert f.evidence["loss"] == "total_loss" and f.message.startswith("'total_loss'")
    falling = {**flat, "train/total_loss": (None, [45.0, 30.0, 25.0, 22.0, 21.0])}
    assert diagnose(Signals.from_arrays(falling), rules=["no_learning"]).findings == []


def test_a_vae_whose_optimizer_barely_moves_is_told_by_its_own_loss(tmp_path):
    alarms = _first(tmp_path, "vae_optimizer_barely_moves")
    assert alarms[0].evidence["loss"] == "total_loss"


@pytest.mark.slow
def test_a_wgan_gp_with_its_own_step_is_looked_at_and_healthy(tmp_path):
    result = _no_alarm(tmp_path, "wgan_gp")
    (d,) = result.diagnoses
    assert d.status["state"] == "completed" and d.healthy
    assert {"exploding_gradient", "dead_relu", "unnormalized_input"} <= set(d.rules_run)
    # the signals of a custom step, per optimizer where there are several
    assert {"grad_norm/global", "optimizer/grad_norm/critic", "optimizer/grad_norm/generator",
            "batch/d_loss", "batch/g_loss"} <= set(d.signals.scalars)
    layers = [t[len("grad_norm/"):] for t in d.signals.scalars if t.startswith("grad_norm/")]
    assert all(name.startswith(("critic/", "generator/")) for name in layers if name != "global")


# -- root cause first --------------------------------------------------------------------------------
def test_the_measured_winner_of_try_fixes_decides_the_order():
    findings = [Finding("dead_relu", "warning", "dead.", where="dense", onset_step=5),
                Finding("oscillating_loss", "warning", "swings.", onset_step=80)]
    trials = [{"finding": "dead_relu", "where": "dense", "verdict": "no better", "before": 0.65,
               "after": 0.64, "change": "he_normal"},
              {"finding": "oscillating_loss", "where": None, "verdict": "improved", "before": 0.65,
               "after": 0.09, "change": "SGD learning_rate 0.5 -> 0.05"}]
    ordered = by_measured_fix(findings, trials)
    assert [f.id for f in ordered] == ["oscillating_loss", "dead_relu"]
    assert ordered[0].evidence["measured_fix"] == "SGD learning_rate 0.5 -> 0.05"
    assert by_measured_fix(findings, trials[:1]) == findings  # nothing measured better: as it was



@pytest.mark.parametrize("name", ["sgd_momentum_batch_size_one", "softmax_on_regression_target"])
def test_the_root_cause_comes_first(tmp_path, name):
    alarms = _first(tmp_path, name)
    for later in alarms[1:]:  # the same cause said twice, or a consequence linked to it
        assert later.id == alarms[0].id or later.cause is not None, (later.id, later.message)
