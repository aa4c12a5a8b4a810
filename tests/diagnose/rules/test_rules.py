"""Pure-rule tests on synthetic signals: each rule fires on its symptom, names
the layer and the onset, stays quiet on a healthy curve, and says why it
cannot run when its signals are missing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfguard.diagnose import RULES, MissingSignals, Signals, Thresholds, diagnose
from tfguard.diagnose._rules.activations import dead_relu, saturated_activation
from tfguard.diagnose._rules.contract import loss_activation_mismatch
from tfguard.diagnose._rules.data import label_range, pipeline_order, unnormalized_input
from tfguard.diagnose._rules.gradients import exploding_gradient, vanishing_gradient
from tfguard.diagnose._rules.loss_curve import (
    no_learning,
    oscillating_loss,
    overfitting,
    slow_convergence,
)
from tfguard.diagnose._rules.numeric import nonfinite

TH = Thresholds()
STEPS = np.arange(1, 101)  # 100 observations, 10 steps per epoch
ENDS = np.arange(10, 101, 10)


def model(layers=("dense", "dense_1", "out"), act="softmax", units=10,
          loss="SparseCategoricalCrossentropy", from_logits=False, first_class="Dense"):
    return {
        "name": "m", "class": "Sequential", "output_units": units, "output_activation": act,
        "loss": {"name": loss, "class": loss, "from_logits": from_logits},
        "optimizer": {"class": "Adam", "learning_rate": 0.001},
        "layers": [{"name": n, "class": first_class if i == 0 else "Dense", "activation": "relu",
                    "units": 8, "params": 1} for i, n in enumerate(layers)],
    }


def healthy_loss(n=10, start=2.3, end=0.2):
    return start * (end / start) ** (np.arange(1, n + 1) / n)


def signals(scalars, **kw):
    return Signals.from_arrays(scalars, epoch_end_steps=kw.pop("ends", ENDS), **kw)


# -- nonfinite -----------------------------------------------------------------------
def test_nonfinite_names_first_layer_and_step():
    g0 = np.ones(100)
    g1 = np.ones(100)
    g1[40:] = np.nan
    g0[41:] = np.nan
    s = signals({"grad_norm/dense": (STEPS, g0), "grad_norm/dense_1": (STEPS, g1),
                 "train/loss": (ENDS, np.r_[healthy_loss(4), [np.nan] * 6])}, model=model())
    (f,) = nonfinite(s, TH)
    assert (f.id, f.severity, f.where, f.onset_step, f.onset_epoch) == (
        "nonfinite", "error", "dense_1", 41, 4)
    assert f.evidence["tags_affected"] == 3


def test_nonfinite_quiet_on_finite_and_skips_without_signals():
    assert nonfinite(signals({"train/loss": (ENDS, healthy_loss())}), TH) == []
    with pytest.raises(MissingSignals):
        nonfinite(Signals(), TH)


def test_nonfinite_reads_the_guard_events():
    s = signals({"train/loss": (ENDS, healthy_loss())},
                texts={"guard/events": [(33, "gradient of 'dense/kernel' has 3 NaN")]})
    (f,) = nonfinite(s, TH)
    assert (f.severity, f.onset_step, f.onset_epoch) == ("warning", 33, 3)


# -- gradients -------------------------------------------------------------------------
def test_exploding_names_the_layer_that_grew_first():
    calm = 1.0 + 0.1 * np.sin(STEPS)
    grow = np.where(STEPS < 30, 1.0, 1.3 ** (STEPS - 29))
    s = signals({"grad_norm/dense": (STEPS, calm), "grad_norm/dense_1": (STEPS, grow)}, model=model())
    (f,) = exploding_gradient(s, TH)
    assert f.where == "dense_1"
    assert f.onset_step == int(STEPS[np.argmax(grow > 100)])  # first point past 100x
    assert f.evidence["growth"] > 100 and f.severity == "warning"


def test_exploding_into_nan_is_an_error():
    grow = 2.0 ** np.arange(100.0)
    grow[60:] = np.inf
    (f,) = exploding_gradient(signals({"grad_norm/global": (STEPS, grow)}), TH)
    assert f.severity == "error" and f.where is None


def test_exploding_quiet_on_noisy_healthy_norms():
    rng = np.random.default_rng(0)
    norms = np.exp(rng.normal(0, 0.8, 100)) * np.linspace(1.0, 0.3, 100)
    spikes = norms.copy()
    spikes[[20, 50, 80]] *= 200  # single spikes never persist
    s = signals({"grad_norm/dense": (STEPS, norms), "grad_norm/out": (STEPS, spikes)})
    assert exploding_gradient(s, TH) == []


def test_exploding_needs_gradient_norms():
    with pytest.raises(MissingSignals, match="no gradient norms"):
        exploding_gradient(signals({"train/loss": (ENDS, healthy_loss())}), TH)


def test_vanishing_autotrainer_thresholds_with_persistence():
    first = np.full(100, 1e-2)
    first[20:] = 1e-6
    last = np.full(100, 0.5)
    s = signals({"grad_norm/dense": (STEPS, first), "grad_norm/dense_1": (STEPS, first * 10),
                 "grad_norm/out": (STEPS, last)}, model=model())
    (f,) = vanishing_gradient(s, TH)
    assert (f.where, f.onset_step, f.onset_epoch, f.severity) == ("dense", 21, 2, "warning")
    assert f.evidence["first_last_ratio"] == pytest.approx(2e-6)
    assert f.evidence["layers_vanished"] == 2


def test_vanishing_quiet_on_brief_dip_and_on_converged_run():
    first = np.full(100, 1e-2)
    first[[10, 11, 30]] = 1e-7  # two consecutive observations: not persistent
    s = signals({"grad_norm/dense": (STEPS, first), "grad_norm/out": (STEPS, np.full(100, 0.5))})
    assert vanishing_gradient(s, TH) == []
    tiny = np.full(100, 1e-5)  # everything small (converged): the ratio is fine
    s = signals({"grad_norm/dense": (STEPS, tiny), "grad_norm/out": (STEPS, tiny * 3)})
    assert vanishing_gradient(s, TH) == []


def test_vanishing_needs_two_layers():
    with pytest.raises(MissingSignals, match="only one layer"):
        vanishing_gradient(signals({"grad_norm/dense": (STEPS, np.ones(100))}), TH)


def test_layers_keyed_by_variable_path_are_named_by_their_path():
    # issue 22: 'dense' of an encoder or of a decoder? A finding names the layer by its path
    # (the model's own name left out); the model description still orders them
    first = np.full(100, 1e-7)
    s = signals({"grad_norm/sequential/dense": (STEPS, first),
                 "grad_norm/sequential/out": (STEPS, np.ones(100))}, model=model())
    (f,) = vanishing_gradient(s, TH)
    assert f.where == "sequential/dense"
    s = signals({"grad_norm/m/dense": (STEPS, first),
                 "grad_norm/m/out": (STEPS, np.ones(100))}, model=model())
    assert vanishing_gradient(s, TH)[0].where == "dense"


# -- activations ---------------------------------------------------------------------------
def test_dead_relu_per_layer_with_onset_and_severity():
    healthy = np.full(100, 0.1)
    dying = np.where(STEPS < 50, 0.2, 0.85)
    dead = np.where(STEPS < 5, 0.5, 1.0)
    s = signals({"activation/dead_fraction/dense": (STEPS, healthy),
                 "activation/dead_fraction/dense_1": (STEPS, dying),
                 "activation/dead_fraction/out": (STEPS, dead)}, model=model())
    found = {f.where: f for f in dead_relu(s, TH)}
    assert set(found) == {"dense_1", "out"}
    assert (found["dense_1"].severity, found["dense_1"].onset_step) == ("warning", 50)
    assert (found["out"].severity, found["out"].onset_step) == ("error", 5)


def test_dead_relu_ignores_two_bad_batches():
    flicker = np.full(100, 0.1)
    flicker[[10, 11, 40, 41]] = 0.95
    assert dead_relu(signals({"activation/dead_fraction/dense": (STEPS, flicker)}), TH) == []


def test_dead_relu_falls_back_on_zero_gradients_skipping_embeddings_and_sigmoid():
    zero = np.full(100, 0.9)
    m = model(layers=("embedding", "dense", "gate", "out"))
    m["layers"][0]["class"] = "Embedding"
    m["layers"][2]["activation"] = "sigmoid"
    s = signals({f"zero_grad_fraction/{n}": (STEPS, zero) for n in ("embedding", "dense", "gate")},
                model=m)
    assert [f.where for f in dead_relu(s, TH)] == ["dense"]
    with pytest.raises(MissingSignals, match="activation statistics"):
        dead_relu(signals({"train/loss": (ENDS, healthy_loss())}), TH)


def test_saturation_on_hidden_layers_only():
    high = np.full(100, 0.8)
    s = signals({"activation/saturated_fraction/dense_1": (STEPS, high),
                 "activation/saturated_fraction/out": (STEPS, high),
                 "activation/saturated_fraction/dense": (STEPS, np.full(100, 0.2))}, model=model())
    assert [(f.where, f.onset_step) for f in saturated_activation(s, TH)] == [("dense_1", 1)]


# -- loss curves ----------------------------------------------------------------------------
def test_no_learning_on_flat_and_on_rising_loss():
    for curve in (np.full(6, 2.30), np.linspace(2.3, 3.0, 6)):
        s = signals({"train/loss": (ENDS[:6], curve)}, model=model())
        (f,) = no_learning(s, TH)
        assert (f.severity, f.onset_epoch, f.evidence["initial_loss"]) == (
            "error", 0, pytest.approx(math.log(10)))


def test_no_learning_quiet_when_it_learnt_during_epoch_zero():
    flat_but_low = np.full(6, 0.3)  # far below the chance loss ln(10)
    assert no_learning(signals({"train/loss": (ENDS[:6], flat_but_low)}, model=model()), TH) == []
    # stock logs: no initial loss, but accuracy climbed
    s = signals({"train/loss": (None, np.full(6, 0.9)),
                 "train/accuracy": (None, [0.3, 0.4, 0.45, 0.5, 0.52, 0.55])})
    assert no_learning(s, TH) == []


def test_no_learning_needs_epochs():
    with pytest.raises(MissingSignals, match="needs 4"):
        no_learning(signals({"train/loss": (ENDS[:2], [2.3, 2.3])}), TH)


def test_slow_convergence_even_slow_descent():
    curve = np.log(10) - 0.03 * np.arange(1, 9)  # 2.27 .. 2.06: still falling evenly
    ends = np.arange(50, 401, 50)
    s = signals({"train/loss": (ends, curve), "train/accuracy": (ends, np.linspace(0.1, 0.3, 8))},
                model=model(), ends=ends)
    (f,) = slow_convergence(s, TH)
    assert f.severity == "warning" and f.evidence["progress"] < 0.3
    # the same curve over 8 epochs of 10 steps: too few steps to call it slow
    assert slow_convergence(signals({"train/loss": (ENDS[:8], curve)}, model=model()), TH) == []


def test_slow_convergence_quiet_on_healthy_and_on_bent_curves():
    s = signals({"train/loss": (ENDS, healthy_loss())}, model=model())
    assert slow_convergence(s, TH) == []
    # a hard problem: fast early drop, then a slow tail: the curve has bent
    bent = np.r_[[1.9, 1.85, 1.83, 1.82, 1.815, 1.81]]
    assert slow_convergence(signals({"train/loss": (ENDS[:6], bent)}, model=model()), TH) == []


def test_slow_convergence_skips_without_an_initial_loss_or_accuracy():
    with pytest.raises(MissingSignals, match="no loss before training"):
        slow_convergence(signals({"train/loss": (None, np.linspace(1.0, 0.9, 6))}), TH)


def test_initial_loss_from_first_batches_then_chance_then_epoch0():
    from tfguard.diagnose._rules.base import finite_epoch_curve, initial_loss

    batch = np.r_[[3.0, 2.9, 2.8], np.linspace(2.7, 2.65, 97)]
    s = signals({"batch/loss": (STEPS, batch), "train/loss": (ENDS, np.linspace(2.75, 2.66, 10))},
                model=model())
    curve = finite_epoch_curve(s, "train/loss")
    assert initial_loss(s, curve) == (pytest.approx(2.95), "batch")  # steps 1-2: first quarter
    s.scalars.pop("batch/loss")
    assert initial_loss(s, curve) == (pytest.approx(math.log(10)), "chance")
    s.model = None
    assert initial_loss(s, curve) == (pytest.approx(2.75), "epoch0")


def test_oscillating_loss_needs_reversals_not_divergence():
    bouncing = np.array([2.0, 1.2, 1.6, 0.9, 1.4, 0.8, 1.3, 0.9, 1.2, 0.8])
    (f,) = oscillating_loss(signals({"train/loss": (ENDS, bouncing)}), TH)
    assert f.onset_step == 30 and f.onset_epoch == 2 and f.evidence["reversals"] >= 3
    diverging = 2.0 * 1.3 ** np.arange(10)
    assert oscillating_loss(signals({"train/loss": (ENDS, diverging)}), TH) == []
    jitter = np.r_[healthy_loss(6), [0.011, 0.009, 0.013, 0.010]]  # tiny values: never significant
    assert oscillating_loss(signals({"train/loss": (ENDS, jitter)}), TH) == []


def test_oscillating_loss_on_windowed_batch_losses():
    rng = np.random.default_rng(1)
    wave = 1.0 + 0.5 * np.sign(np.sin(np.arange(100) / 4.0)) + rng.normal(0, 0.02, 100)
    (f,) = oscillating_loss(signals({"batch/loss": (STEPS, wave)}, ends=None), TH)
    assert f.onset_step is not None and "windows" in f.message


def test_overfitting_onset_after_best_epoch():
    train = healthy_loss(10, 1.0, 0.05)
    val = np.array([0.9, 0.6, 0.45, 0.40, 0.42, 0.47, 0.52, 0.6, 0.7, 0.8])
    (f,) = overfitting(signals({"train/loss": (ENDS, train), "val/loss": (ENDS, val)}), TH)
    assert (f.onset_epoch, f.onset_step, f.evidence["best_epoch"]) == (4, 50, 3)


def test_overfitting_quiet_on_plateau_and_noise():
    train = healthy_loss(10, 1.0, 0.2)
    val = np.array([0.9, 0.6, 0.45, 0.40, 0.43, 0.41, 0.42, 0.44, 0.42, 0.43])  # +7.5 % at worst
    assert overfitting(signals({"train/loss": (ENDS, train), "val/loss": (ENDS, val)}), TH) == []
    # val rises but so does train: not overfitting (that is a diverging run)
    both = np.array([0.9, 0.6, 0.45, 0.40, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert overfitting(signals({"train/loss": (ENDS, both), "val/loss": (ENDS, both)}), TH) == []
    with pytest.raises(MissingSignals, match="val/loss"):
        overfitting(signals({"train/loss": (ENDS, train)}), TH)


# -- model contract and data ---------------------------------------------------------------
@pytest.mark.parametrize("act,units,loss,logits,severity", [
    ("linear", 10, "SparseCategoricalCrossentropy", False, "error"),
    ("softmax", 10, "SparseCategoricalCrossentropy", True, "warning"),
    ("softmax", 1, "BinaryCrossentropy", False, "error"),
    ("softmax", 3, "BinaryCrossentropy", False, "warning"),
    ("sigmoid", 1, "SparseCategoricalCrossentropy", False, "error"),
    # a ReLU read as probabilities: an all-zero row is a NaN categorical loss (tfguard._losses)
    ("relu", 5, "CategoricalCrossentropy", False, "error"),
    ("relu", 5, "CategoricalCrossentropy", True, "warning"),
])
def test_loss_activation_mismatch(act, units, loss, logits, severity):
    found = loss_activation_mismatch(Signals(model=model(act=act, units=units, loss=loss,
                                                         from_logits=logits)), TH)
    assert found and max(f.severity for f in found) == severity
    assert all(f.where == "out" and f.onset_step == 0 for f in found)


@pytest.mark.parametrize("act,loss,logits", [
    ("softmax", "SparseCategoricalCrossentropy", False),
    ("linear", "sparse_categorical_crossentropy", True),
    ("sigmoid", "binary_crossentropy", False),
    ("linear", "mse", False),
])
def test_loss_activation_match_is_quiet(act, loss, logits):
    assert loss_activation_mismatch(Signals(model=model(act=act, loss=loss, from_logits=logits)), TH) == []


def test_loss_activation_mismatch_needs_the_model_description():
    with pytest.raises(MissingSignals, match="config/model"):
        loss_activation_mismatch(Signals(), TH)


def test_unnormalized_input_and_in_model_rescaling():
    raw = {"data/input_std": (STEPS, np.full(100, 85.0)), "data/input_mean": (STEPS, np.full(100, 110.0)),
           "data/input_min": (STEPS, np.zeros(100)), "data/input_max": (STEPS, np.full(100, 255.0))}
    (f,) = unnormalized_input(signals(raw, model=model()), TH)
    assert f.onset_step == 1 and f.evidence["max"] == 255.0
    assert unnormalized_input(signals(raw, model=model(first_class="Rescaling")), TH) == []
    scaled = {"data/input_std": (STEPS, np.full(100, 0.9)), "data/input_mean": (STEPS, np.full(100, 0.1))}
    assert unnormalized_input(signals(scaled), TH) == []


@pytest.mark.parametrize("loss,act,units,low,high,expect", [
    ("SparseCategoricalCrossentropy", "softmax", 10, 1, 10, "error"),
    ("SparseCategoricalCrossentropy", "softmax", 10, 0, 9, None),
    ("BinaryCrossentropy", "sigmoid", 1, -1, 1, "error"),
    ("BinaryCrossentropy", "sigmoid", 1, 0, 1, None),
    ("MeanSquaredError", "sigmoid", 1, 0, 5, "warning"),
    ("MeanSquaredError", "linear", 1, -50, 50, None),
])
def test_label_range(loss, act, units, low, high, expect):
    s = signals({"data/label_min": (STEPS, np.full(100, float(low))),
                 "data/label_max": (STEPS, np.full(100, float(high)))},
                model=model(act=act, units=units, loss=loss))
    found = label_range(s, TH)
    assert (found[0].severity if found else None) == expect


def test_label_range_needs_stats_and_model():
    with pytest.raises(MissingSignals, match="batch statistics"):
        label_range(Signals(model=model()), TH)
    with pytest.raises(MissingSignals, match="model description"):
        label_range(signals({"data/label_min": (STEPS, np.zeros(100)),
                             "data/label_max": (STEPS, np.ones(100))}), TH)


def test_pipeline_order_from_single_class_batches_and_lint():
    sorted_labels = np.repeat(np.arange(10.0), 10)
    s = signals({"data/label_min": (STEPS, sorted_labels), "data/label_max": (STEPS, sorted_labels)})
    (f,) = pipeline_order(s, TH)
    assert f.evidence["single_class_fraction"] == 1.0 and f.onset_step == 1
    lint = [{"id": "pipeline_order", "severity": "warning", "message": "shuffle after batch",
             "evidence": {"code": "shuffle_after_batch", "position": 2}}]
    found = pipeline_order(Signals(lint=lint), TH)
    assert found[0].message.startswith("static check (shuffle_after_batch)")
    assert found[0].evidence == {"position": 2, "code": "shuffle_after_batch"}  # its sub-code kept


def test_pipeline_order_quiet_on_shuffled_and_imbalanced_batches():
    rng = np.random.default_rng(0)
    lows = np.zeros(100)
    highs = rng.integers(1, 10, 100).astype(float)
    s = signals({"data/label_min": (STEPS, lows), "data/label_max": (STEPS, highs)})
    assert pipeline_order(s, TH) == []
    # 95 % of one class: single-class batches, but of one class only
    imbalanced = np.where(rng.random(100) < 0.9, 0.0, 1.0)
    s = signals({"data/label_min": (STEPS, np.zeros(100)), "data/label_max": (STEPS, imbalanced)})
    assert pipeline_order(s, TH) == []
    with pytest.raises(MissingSignals):
        pipeline_order(Signals(), TH)


# -- diagnose ----------------------------------------------------------------------------------
def test_diagnose_collects_skipped_reasons_and_sorts_by_severity():
    s = signals({"train/loss": (ENDS, np.r_[np.full(5, 2.3), [np.nan] * 5]),
                 "val/loss": (ENDS, np.r_[np.full(5, 2.3), [np.nan] * 5])}, model=model(act="linear"))
    d = diagnose(s)
    assert d.findings[0].severity == "error"
    assert set(d.rules_run) | set(d.skipped_ids) == set(RULES)
    assert {"nonfinite", "no_learning", "loss_activation_mismatch"} <= set(d.ids)
    assert all(s["reason"] for s in d.rules_skipped)


def test_diagnose_subset_thresholds_and_errors():
    s = signals({"activation/dead_fraction/dense": (STEPS, np.full(100, 0.6))})
    assert diagnose(s, rules=["dead_relu"]).ids == []
    assert diagnose(s, rules=["dead_relu"], thresholds={"dead_fraction": 0.5}).ids == ["dead_relu"]
    from tfguard._errors import ContractError

    with pytest.raises(ContractError, match="unknown rule"):
        diagnose(s, rules=["no_such_rule"])
    with pytest.raises(ContractError, match="unknown threshold"):
        diagnose(s, thresholds={"dead_fractoin": 0.5})


series = st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32),
                            st.floats(0, 1e3)), min_size=0, max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loss=series, grads=series, dead=series, labels=series)
def test_rules_never_crash_on_any_values(loss, grads, dead, labels):
    n = len(grads)
    s = Signals.from_arrays({
        "train/loss": (np.arange(len(loss)) * 10 + 10, loss),
        "val/loss": (np.arange(len(loss)) * 10 + 10, loss[::-1]),
        "batch/loss": (np.arange(n) + 1, grads),
        "grad_norm/dense": (np.arange(n) + 1, grads),
        "grad_norm/out": (np.arange(n) + 1, grads[::-1]),
        "activation/dead_fraction/dense": (np.arange(len(dead)) + 1, dead),
        "data/label_min": (np.arange(len(labels)) + 1, labels),
        "data/label_max": (np.arange(len(labels)) + 1, labels),
        "data/input_std": (np.arange(len(labels)) + 1, labels),
    }, model=model())
    d = diagnose(s)
    assert not [r for r in d.rules_skipped if r["reason"].startswith("rule failed")], d.rules_skipped


def test_sgd_with_momentum_says_each_factor_of_what_it_compares():
    """`SGD(0.05, momentum=0.9)`: the rate is 5x Keras's default; 50x is the step it makes (issue 46)."""
    from tfguard.diagnose._rules.optimizer import learning_rate

    s = Signals.from_arrays({"train/loss": (None, [2.3, 2.0, 1.8, 1.6, 1.5])},
                            model={"optimizer": {"class": "SGD", "learning_rate": 0.05, "momentum": 0.9}})
    [f] = learning_rate(s, Thresholds())
    assert f.message.startswith("SGD's learning rate is 0.05, 5x Keras's default for SGD (0.01);")
    assert "moves it 0.5 a step, 50x the step of that default (no momentum)" in f.message
    assert f.evidence["times_default"] == pytest.approx(5) and f.evidence["times_default_step"] == pytest.approx(50)
