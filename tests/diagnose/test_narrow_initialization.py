"""Dead ReLUs and vanishing gradients from one cause: initializers far too narrow for the depth (issue 41).

Public bugs `dd-circle-relu-uniform` (eight ReLU layers of 5 units drawn from RandomUniform(-0.05,
0.05)) and `at-dying-relu` (33 plain ReLU layers with Glorot's scale) show both symptoms; which one
is listed first followed the order of the rules, not the evidence. The initializers are read from
the model description (`rules.initialization.too_narrow`), and a dead layer explains vanishing
gradients only when it died no later than they vanished.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfguard._findings import Finding
from tfguard.diagnose import Signals, Thresholds
from tfguard.diagnose._causes import by_cause
from tfguard.diagnose._rules.gradients import vanishing_gradient
from tfguard.diagnose._rules.initialization import too_narrow

from . import user_programs as U

ALARMS = ("warning", "error")
TH = Thresholds()


def _deep_relu(initializer: str, hidden_bias: float = 0.0) -> U.UserProgram:
    return U.UserProgram(f"deep_relu_{initializer}_{hidden_bias}", None, f"""
        x, y = load_breast_cancer(return_X_y=True)
        x = ((x - x.mean(0)) / x.std(0)).astype("float32")
        model = keras.Sequential([keras.Input((30,))])
        for i in range(8):
            model.add(keras.layers.Dense(16, kernel_initializer={initializer}, name=f"hidden_{{i}}",
                                         bias_initializer=keras.initializers.Constant({hidden_bias})))
            model.add(keras.layers.Activation("relu"))
        model.add(keras.layers.Dense(1, activation="sigmoid"))
        model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
        model.fit(x, y.astype("float32"), epochs=4, batch_size=32, verbose=0)
    """)


def _alarms(program: U.UserProgram, tmp_path) -> list:
    result = U.run(program, tmp_path)
    assert result.exit_code == 0, result.traceback
    return [f for d in result.diagnoses for f in d.findings if f.severity in ALARMS]


def test_initializers_far_too_narrow_are_named_as_the_cause_of_dead_and_vanishing(tmp_path):
    # before: dead_relu first (dd-circle-relu-uniform), and nothing named the initializer
    alarms = _alarms(_deep_relu("keras.initializers.RandomUniform(-0.05, 0.05)"), tmp_path)
    assert alarms, "no finding"
    first = alarms[0]
    assert (first.id, first.evidence.get("code"), first.evidence.get("direction")) == \
        ("vanishing_gradient", "initialization", "narrow"), [(f.id, f.message) for f in alarms]
    assert first.where == "hidden_0" and first.evidence["layers_in_stack"] == 8
    # std 0.029 against He's 0.26 for the first layer (fan-in 30), 0.35 for the 7 others (16)
    assert first.evidence["signal_factor"] == pytest.approx(0.112 * 0.0816 ** 7, rel=0.01)
    assert "RandomUniform(minval=-0.05, maxval=0.05)" in first.message
    assert "training shows what it produces" in first.message
    assert "he_normal" in first.suggestion
    # what it produces is linked to it, not listed as a cause of its own
    for f in alarms[1:]:
        assert f.id in ("dead_relu", "no_learning", "collapsed_output", "untrained_variable"), f.id
        assert f.cause == first.key, (f.id, f.cause)


def test_the_same_stack_with_he_initialization_stays_quiet(tmp_path):
    assert _alarms(_deep_relu("'he_uniform'"), tmp_path) == []


def test_a_stack_dead_from_its_biases_is_not_blamed_on_the_initializer(tmp_path):
    # He initialization, every hidden bias -20: the ReLUs are dead, the initializer is not at fault
    alarms = _alarms(_deep_relu("'he_uniform'", hidden_bias=-20.0), tmp_path)
    assert alarms and alarms[0].id == "dead_relu", [(f.id, f.message) for f in alarms]
    assert all(f.evidence.get("code") != "initialization" for f in alarms)


# -- the stack, read from the model description ------------------------------------------------
def _description(depth: int, std, between: str | None = None, merge: bool = False) -> Signals:
    layers, fan = [], 784
    for i in range(depth):
        layers.append({"name": f"dense_{i}", "class": "Dense", "activation": "linear",
                       "initializer": {"class": "GlorotUniform", "text": "GlorotUniform",
                                       "std": std(fan, 128), "fan_in": fan}})
        layers.append({"name": f"relu_{i}", "class": "Activation", "activation": "relu"})
        if between:
            layers.append({"name": f"norm_{i}", "class": between, "activation": None})
        fan = 128
    if merge:
        layers.append({"name": "add", "class": "Add", "activation": None})
    layers.append({"name": "out", "class": "Dense", "activation": "softmax",
                   "initializer": {"class": "Zeros", "text": "Zeros", "std": 0.0, "fan_in": 128}})
    return Signals(model={"layers": layers, "output_units": 10, "output_activation": "softmax"})


def _glorot(fan_in, fan_out):
    return math.sqrt(2.0 / (fan_in + fan_out))


def test_glorot_on_a_plain_relu_stack_is_too_narrow_only_when_deep():
    assert too_narrow(_description(5, _glorot), TH) is None  # Keras's default MLP: 0.19 in all
    deep = too_narrow(_description(33, _glorot), TH)  # at-dying-relu's shape
    assert deep is not None and len(deep["layers"]) == 33
    assert deep["factor"] == math.prod(e[1] for e in deep["layers"]) < 2e-5
    assert deep["narrowest"][1] == pytest.approx(math.sqrt(0.5), rel=1e-6)
    # normalization between the layers restores the scale; a residual merge carries it around
    assert too_narrow(_description(33, _glorot, between="BatchNormalization"), TH) is None
    assert too_narrow(_description(33, _glorot, merge=True), TH) is None
    # He's scale keeps the signal's size whatever the depth
    assert too_narrow(_description(60, lambda fan_in, _: math.sqrt(2.0 / fan_in)), TH) is None


def test_the_description_alone_is_a_remark_that_training_must_confirm():
    (f,) = vanishing_gradient(_description(33, _glorot), TH)
    assert f.severity == "info" and f.evidence["needs_symptom"] == 1
    ordered = by_cause([f])
    assert ordered[0].severity == "info"  # no symptom: it stays a remark
    dead = _finding("dead_relu", "warning", 19)
    ordered = by_cause([dead, f])
    assert [g.id for g in ordered] == ["vanishing_gradient", "dead_relu"]
    assert ordered[0].severity == "warning" and ordered[1].cause == ordered[0].key
    # a NaN or an oscillation is not what a narrow initializer produces
    nan = _finding("nonfinite", "error", 40)
    remark, symptom = by_cause([nan, f])
    assert remark.severity == "info" and symptom.id == "nonfinite" and symptom.cause is None


def _finding(symptom: str, severity: str, step: int) -> Finding:
    return Finding(symptom, severity, f"{symptom}.", where="dense_5", onset_step=step)


# -- dead layers explain vanishing gradients only when they died first -------------------------
def _norms_and_deaths(died_at: int, layer: str = "dense_1") -> Signals:
    steps = np.arange(1, 41)
    dead = np.where(steps >= died_at, 1.0, 0.3)
    return Signals.from_arrays(
        {"grad_norm/dense": (steps, np.full(40, 1e-6)), "grad_norm/dense_1": (steps, np.full(40, 1e-4)),
         "grad_norm/out": (steps, np.full(40, 0.1)),
         f"activation/dead_fraction/{layer}": (steps, dead)},
        model={"layers": [{"name": "dense"}, {"name": "dense_1"}, {"name": "out"}]})


def test_a_layer_that_died_after_the_gradients_vanished_does_not_explain_them():
    (late,) = vanishing_gradient(_norms_and_deaths(died_at=19), TH)
    assert late.severity == "warning" and "Explained by" not in late.message
    (early,) = vanishing_gradient(_norms_and_deaths(died_at=1), TH)
    assert early.severity == "info" and "dead from step 1" in early.message
    # a dead first layer blocks its own weights' gradient (d4ml-038: Adam at 100 kills it at step 5)
    (own,) = vanishing_gradient(_norms_and_deaths(died_at=1, layer="dense"), TH)
    assert own.severity == "info" and "'dense', dead from step 1" in own.message
