"""The vocabulary, `Finding`, `Thresholds` and `Signals` helpers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tfguard._errors import ContractError
from tfguard.diagnose import RULES, SYMPTOMS, Finding, Signals, Thresholds
from tfguard.diagnose._inputs.signals import epochs_for

PUBLISHED = ("nonfinite", "exploding_gradient", "vanishing_gradient", "dead_relu",
             "saturated_activation", "oscillating_loss", "slow_convergence", "no_learning",
             "overfitting", "loss_activation_mismatch", "unnormalized_input", "label_range",
             "pipeline_order")  # public API since the first release: never renamed


def test_published_ids_are_kept_and_every_id_has_one_rule():
    assert set(PUBLISHED) <= set(SYMPTOMS)
    assert list(RULES) == list(SYMPTOMS)


def test_finding_validates_and_serializes():
    f = Finding("dead_relu", "warning", "m", onset_step=np.int64(4), evidence={"x": np.float32(0.5)})
    assert f.onset_step == 4 and type(f.onset_step) is int
    assert f.to_dict()["evidence"] == {"x": 0.5} and f.key == ("dead_relu", None)
    with pytest.raises(ContractError, match="severity"):
        Finding("dead_relu", "fatal", "m")
    with pytest.raises(ContractError, match="id"):
        Finding("", "info", "m")


def test_every_threshold_is_documented_with_its_source():
    doc = Thresholds.__doc__
    for field in dataclasses.fields(Thresholds):
        assert f"        {field.name}:" in doc, field.name
        text = " ".join(doc.split(f"        {field.name}:")[1].split("Defaults to")[0].split())
        assert any(src in text for src in ("AUTOTRAINER", "DeepDiagnosis", "TheDeepChecker", "OLMo-core",
                                           "tfguard: measured")), field.name
        default = doc.split(f"        {field.name}:")[1].split("Defaults to `")[1].split("`")[0]
        assert default == repr(field.default) or float(default) == field.default, field.name


def test_thresholds_resolve():
    assert Thresholds.resolve(None) == Thresholds()
    t = Thresholds(persistence=5)
    assert Thresholds.resolve(t) is t
    with pytest.raises(ContractError, match="unknown threshold"):
        Thresholds.resolve({"nope": 1})


def test_epochs_for_and_truncation():
    ends = np.array([10, 20, 30])
    assert epochs_for(np.array([1, 10, 11, 30, 31, -1]), ends).tolist() == [0, 0, 1, 2, 3, -1]
    s = Signals.from_arrays({"batch/loss": (np.arange(1, 41), np.ones(40)),
                             "train/loss": (ends, [3.0, 2.0, 1.0])}, epoch_end_steps=ends)
    cut = s.truncated(21, 2)
    assert cut.series("batch/loss").steps.max() == 20 and len(cut.series("train/loss")) == 2
    assert len(s.series("batch/loss")) == 40  # the original is untouched
    assert (s.epoch_of(15), s.step_of_epoch(1), s.step_of_epoch(5)) == (1, 20, None)


def test_from_arrays_checks_lengths_and_epoch_indexed_series():
    with pytest.raises(ValueError, match="different lengths"):
        Signals.from_arrays({"train/loss": ([1, 2], [1.0])})
    s = Signals.from_arrays({"train/loss": (None, [1.0, 0.5])}, epoch_end_steps=[7, 14])
    assert s.series("train/loss").steps.tolist() == [7, 14]
    assert s.series("train/loss").epochs.tolist() == [0, 1]


def test_per_layer_order_follows_the_model():
    model = {"layers": [{"name": "encoder"}, {"name": "dense_10"}, {"name": "dense_2"}]}
    s = Signals.from_arrays({f"grad_norm/{n}": ([1], [1.0]) for n in
                             ("dense_2", "extra", "m/encoder", "dense_10", "global")}, model=model)
    assert list(s.per_layer("grad_norm")) == ["encoder", "dense_10", "dense_2", "extra"]
    s.model = None
    assert list(s.per_layer("grad_norm")) == ["dense_2", "dense_10", "extra", "m/encoder"]
