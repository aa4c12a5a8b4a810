"""The mechanical edits and the choice of trials, without training (fast)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfguard._findings import Finding
from tfguard.remedies import NotApplicable, Remedy, _edits, plan, remedies_for, verdict
from tfguard.remedies._intercept import Intercept
from tfguard.remedies._trial import evaluation_data, run_curve


def test_verdict_needs_the_margin_and_never_calls_a_non_finite_trial_a_fix():
    assert verdict(1.0, 0.951) == "no better"
    assert verdict(1.0, 0.949) == "improved"
    assert verdict(1.0, 1.051) == "worse"
    assert verdict(float("nan"), float("nan")) == "no better"
    assert verdict(None, 0.5) == "improved"  # the original trained no epoch
    assert verdict(0.5, float("inf")) == "worse"
    assert verdict(-2.0, -2.5, margin=0.1) == "improved"  # negative losses: lower is better


def test_label_mapping_follows_the_data():
    src, dst, text = _edits.label_mapping(np.arange(1, 11), 0, 9)
    assert dst.tolist() == list(range(10)) and text == "labels {1, 2, …, 10} → {0, 1, …, 9}"
    src, dst, _ = _edits.label_mapping(np.array([0.0, 1.0]), -1, 1)  # hinge
    assert dst.tolist() == [-1.0, 1.0]
    fractional = np.arange(10) / 255.0
    src, dst, _ = _edits.label_mapping(fractional, 0, 9)
    assert _edits.remap_labels(fractional[[3, 9]], src, dst).tolist() == [3.0, 9.0]
    src, dst, text = _edits.label_mapping(np.linspace(0, 50, 100), 0, 1)  # a regression target
    assert text.startswith("targets scaled") and dst.min() == 0 and dst.max() == 1


def test_data_edits_work_on_arrays_and_datasets():
    x = np.arange(24, dtype="float32").reshape(6, 4) * 100
    y = np.array([1, 2, 3, 1, 2, 3])
    mean, std = _edits.feature_stats(x)
    np.testing.assert_allclose(_edits.standardize(x, mean, std).mean(0), 0, atol=1e-5)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(2)
    mean_ds, _ = _edits.feature_stats(ds)
    np.testing.assert_allclose(mean_ds, mean)
    values = _edits.label_values(ds)
    src, dst, _ = _edits.label_mapping(values, 0, 2)
    labels = np.concatenate([b.numpy() for _, b in _edits.remap_labels(ds, src, dst)])
    assert labels.tolist() == [0, 1, 2, 0, 1, 2]
    first = next(iter(_edits.standardize(ds, mean, std)))[0].numpy()
    np.testing.assert_allclose(first, (x[:2] - mean) / std, rtol=1e-5)
    with pytest.raises(NotApplicable, match="dict"):
        _edits.feature_stats({"a": x})


def test_the_learning_rate_of_a_loss_scale_optimizer_is_its_inner_optimizers():
    scaled = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.5))
    assert _edits.learning_rate_of(scaled) == pytest.approx(0.5)
    optimizer, text = _edits.scale_learning_rate(scaled, 0.1)
    assert text == "LossScaleOptimizer learning_rate 0.5 → 0.05"
    assert float(optimizer.inner_optimizer.learning_rate) == pytest.approx(0.05)
    # a schedule inside the wrapper is left alone, as it is without the wrapper
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    wrapped = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(schedule))
    with pytest.raises(NotApplicable, match="schedule"):
        _edits.scale_learning_rate(wrapped, 0.1)
    assert wrapped.inner_optimizer.get_config()["learning_rate"]["class_name"] == "ExponentialDecay"


def test_optimizer_and_loss_edits_say_what_they_changed():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    with pytest.raises(NotApplicable, match="schedule"):
        _edits.scale_learning_rate(keras.optimizers.SGD(schedule), 0.1)
    with pytest.raises(NotApplicable, match="already clips"):
        _edits.set_clipnorm(keras.optimizers.Adam(global_clipnorm=1.0))
    with pytest.raises(NotApplicable, match="already takes logits"):
        _edits.logits_loss(keras.losses.CategoricalCrossentropy(from_logits=True))
    assert _edits.crossentropy(keras.losses.sparse_categorical_crossentropy).kind == "sparse_categorical"
    with pytest.raises(NotApplicable, match="not a cross-entropy"):
        _edits.crossentropy("mse")
    # a Loss object keeps the rest of its configuration
    loss, text = _edits.logits_loss(keras.losses.SparseCategoricalCrossentropy(ignore_class=-1))
    assert (loss.get_config()["from_logits"], loss.get_config()["ignore_class"]) == (True, -1)
    assert text == "SparseCategoricalCrossentropy(from_logits=True)"


def test_plan_tries_root_causes_once_each_and_skips_what_their_remedy_covers():
    lr = Finding("learning_rate", "error", "too high", evidence={"direction": "high",
                 "learning_rate": 0.5, "optimizer": "SGD"})
    dead = Finding("dead_relu", "warning", "dead", where="d", cause=("learning_rate", None))
    boom = Finding("exploding_gradient", "warning", "boom")
    nan = Finding("nonfinite", "error", "nan")
    info = Finding("overfitting", "info", "mild")
    pairs = plan([lr, dead, boom, nan, info])
    assert [(f.id, r.key) for f, r in pairs] == [
        ("learning_rate", "learning_rate_x0.1"), ("learning_rate", "learning_rate_default"),
        ("exploding_gradient", "clipnorm")]  # nonfinite's remedies were already planned
    assert len(plan([lr, boom], max_trials=1)) == 1
    assert remedies_for(Finding("input_bound", "warning", "x")) == []
    low = Finding("learning_rate", "warning", "too low", evidence={"direction": "low",
                  "learning_rate": 1e-7, "optimizer": "SGD"})
    assert [r.title for r in remedies_for(low)] == ["learning_rate ×10",
                                                    "learning_rate 1.00e-07 → 0.01 (SGD default)"]


def test_the_catalogue_is_one_registry_that_both_documents_and_chooses():
    from tfguard._findings import SYMPTOMS
    from tfguard.remedies import _catalogue

    ids = [fid for entry in _catalogue.CATALOGUE for fid in entry.answers]
    assert len(ids) == len(set(ids)), "a finding id answered by two entries: one would be dead"
    assert set(ids) <= set(SYMPTOMS)
    table = _catalogue.catalogue_table()
    assert _catalogue.__doc__.count(table) == 1  # the docstring shows the registry, nothing else
    evidence = {"trained_unused": {"freeze": "teacher"}}  # without it nothing is named to freeze
    for fid in ids:
        assert fid in table
        found = remedies_for(Finding(fid, "warning", "x", evidence=evidence.get(fid, {})))
        assert found and {r.answers for r in found} == {fid}, fid
    assert [fid for fid in SYMPTOMS if fid not in ids and remedies_for(Finding(fid, "warning", "x"))] == []


def test_intercept_applies_compile_and_layer_remedies_and_puts_keras_back():
    compile_before, fit_before = keras.Model.compile, keras.Model.fit
    remedy = remedies_for(Finding("dead_relu", "warning", "dead"))[1]  # relu -> leaky_relu
    with Intercept(remedy) as seen:
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                                  keras.layers.Dense(2, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(np.ones((8, 3)), np.zeros(8), epochs=2, verbose=0, validation_split=0.25)
    assert keras.Model.compile is compile_before and keras.Model.fit is fit_before
    assert _edits.activation_name(model.layers[0]) == "leaky_relu"
    assert _edits.activation_name(model.layers[1]) == "softmax"  # the output is left alone
    assert seen.changes == [f"layer '{model.layers[0].name}' activation relu → leaky_relu"]
    curve, kept, last = run_curve(seen.fits)
    assert last is model and len(curve["val_loss"]) == 2 and kept is None
    x, y = evaluation_data(seen.fits[0].arguments)
    assert x.shape == (2, 3) and y.shape == (2,)


def test_a_remedy_that_does_not_apply_says_why():
    lr = remedies_for(Finding("learning_rate", "error", "high", evidence={"direction": "high"}))[0]
    with Intercept(lr) as seen:
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(keras.optimizers.schedules.ExponentialDecay(
            0.1, 10, 0.5)), loss="mse")
    assert not seen.changes and "schedule" in seen.notes[0]
    assert isinstance(lr, Remedy)


def _seen(val_losses, kept=None, changes=("a change",), fraction=1.0):
    from tfguard.remedies._intercept import FitCapture

    seen = Intercept(epochs_fraction=fraction)
    model = object()
    seen.fits.append(FitCapture(model, 0, {}, [{"loss": v, "val_loss": v} for v in val_losses],
                                kept_epoch=kept))
    seen.changes.extend(changes)
    return seen


def test_an_early_stopped_trial_is_judged_by_the_weights_it_kept_against_the_original_end():
    from tfguard.remedies import judge

    overfit = Finding("overfitting", "warning", "val loss rises")
    remedy = remedies_for(overfit)[0]
    original = _seen([1.0, 0.7, 0.9, 1.1, 1.3])
    trial = judge(overfit, remedy, original, _seen([1.0, 0.7, 0.9, 1.1], kept=1))
    assert (trial.before, trial.after, trial.verdict) == (1.3, 0.7, "improved")
    assert "kept the weights of epoch 2" in trial.notes[0]
    shortened = judge(overfit, remedy, original, _seen([0.9, 0.6], fraction=0.4))
    assert (shortened.before, shortened.after) == (0.7, 0.6)  # the original at the same epoch
    idle = judge(overfit, remedy, original, _seen([0.1], changes=()))
    assert idle.verdict == "not applied" and not idle.fix
