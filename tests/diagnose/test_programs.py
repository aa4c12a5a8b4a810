"""End to end: real training programs -> real event files -> diagnosis (offline and live).

Every buggy program must be diagnosed with its symptom, offline from its
event files and live by `LiveDiagnosis` at an epoch of the run; every
healthy program must yield no warning and no error, either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tfguard.diagnose import SYMPTOMS
from tfguard.diagnose._causes import INVARIANTS

from . import programs
from .test_pipeline_pitfalls import SYMPTOMS_SHOWN

BUGGY = [p for p in programs.PROGRAMS if p.target]
HEALTHY = [p for p in programs.PROGRAMS + programs.STOCK if not p.target]
STOCK_BUGGY = [p for p in programs.STOCK if p.target]
ALARMS = ("warning", "error")
BENCHMARKS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"


def _alarms(findings):
    return {f.id for f in findings if f.severity in ALARMS}


def test_every_symptom_has_a_buggy_program():
    # the invariants' programs: tests/invariants; bad_record's: tests/diagnose/rules/test_firewall_evidence.py
    shown = set(SYMPTOMS_SHOWN) | set(INVARIANTS) | {"bad_record"}
    assert {p.target for p in BUGGY} | shown == set(SYMPTOMS)
    assert len(HEALTHY) >= 3


def test_the_logdir_holds_every_run_in_both_layouts(offline):
    assert set(offline) == {p.name for p in programs.PROGRAMS + programs.STOCK}
    for p in programs.PROGRAMS:
        assert offline[p.name].source == "tfguard"
    for p in programs.STOCK:
        assert offline[p.name].source == "keras"


@pytest.mark.parametrize("program", BUGGY + STOCK_BUGGY, ids=lambda p: p.name)
def test_buggy_program_is_diagnosed_offline(offline, program):
    d = offline[program.name]
    assert program.target in _alarms(d.findings), [(f.id, f.severity) for f in d.findings]


@pytest.mark.parametrize("program", BUGGY + STOCK_BUGGY, ids=lambda p: p.name)
def test_buggy_program_is_diagnosed_live_during_training(trained, program):
    _, lives, _ = trained
    live = lives[program.name]
    found = [f for f in live.findings if f.id == program.target and f.severity in ALARMS]
    assert found, [(f.id, f.severity) for f in live.findings]
    epochs = len(live.recorder.signals().epoch_end_steps)
    reported = live.reported_epoch[found[0].key]
    assert 0 <= reported < epochs
    if found[0].onset_epoch is not None:
        assert found[0].onset_epoch <= reported


@pytest.mark.parametrize("program", HEALTHY, ids=lambda p: p.name)
def test_healthy_program_raises_no_warning_or_error(trained, offline, program):
    _, lives, _ = trained
    assert _alarms(offline[program.name].findings) == set()
    assert _alarms(lives[program.name].findings) == set()


@pytest.mark.parametrize("program", programs.PROGRAMS, ids=lambda p: p.name)
def test_live_and_offline_agree(trained, offline, program):
    _, lives, _ = trained
    assert _alarms(lives[program.name].findings) == _alarms(offline[program.name].findings)


def test_no_rule_crashed_on_any_run(offline):
    for d in offline.values():
        assert not [s for s in d.rules_skipped if s["reason"].startswith("rule failed")], d.run


def test_layers_are_named(offline):
    def where(run, symptom):
        return {f.where for f in offline[run].by_id(symptom)}

    assert where("dead_relu", "dead_relu") == {"hidden_1"}
    assert where("saturated_activation", "saturated_activation") == {"hidden_0", "hidden_1"}
    assert where("vanishing_gradient", "vanishing_gradient") == {"hidden_0"}
    assert where("exploding_gradient", "exploding_gradient") == {"linear"}
    assert where("loss_activation_mismatch", "loss_activation_mismatch") == {"out"}


def test_onsets_are_early_and_ordered(offline):
    explode = offline["exploding_gradient"].by_id("exploding_gradient")[0]
    assert explode.onset_step is not None and explode.onset_step < 50  # 2 epochs of 25 steps
    assert not offline["exploding_gradient"].by_id("nonfinite")  # caught before any NaN
    nan = offline["nonfinite"].by_id("nonfinite")[0]
    assert nan.severity == "error" and nan.onset_step <= 7 and nan.onset_epoch == 0
    # after the run died, no other rule reads its NaN statistics; the cause comes first
    # the growth before the NaN is told between its cause and the NaN (issue 22)
    assert offline["nonfinite"].ids == ["learning_rate", "exploding_gradient", "nonfinite"]
    assert nan.cause == ("learning_rate", None) and "SGD's learning rate is 0.05" in nan.message
    label = offline["label_range"].by_id("label_range")[0]
    assert label.onset_step == 1 and label.evidence["label_min"] == -1.0
    over = offline["overfitting"].by_id("overfitting")[0]
    assert 0 < over.onset_epoch == over.evidence["best_epoch"] + 1
    dead = offline["dead_relu"].by_id("dead_relu")[0]
    assert dead.severity == "error" and dead.onset_step == 1


def test_a_dead_layer_explains_the_vanishing_gradient(offline):
    vanishing = offline["dead_relu"].by_id("vanishing_gradient")
    assert vanishing and vanishing[0].severity == "info"
    assert "hidden_1" in vanishing[0].message


def test_pipeline_order_static_and_runtime(offline):
    found = offline["pipeline_order"].by_id("pipeline_order")
    messages = " ".join(f.message for f in found)
    assert "static check (shuffle_after_batch)" in messages
    assert any(f.evidence.get("single_class_fraction", 0) > 0.8 for f in found)


def test_stock_keras_logs_say_which_rules_could_not_run(offline):
    d = offline["stock_healthy_digits"]
    reasons = {s["id"]: s["reason"] for s in d.rules_skipped}
    for rule in ("exploding_gradient", "vanishing_gradient"):
        assert "no gradient norms" in reasons[rule] and "keras.callbacks.TensorBoard" in reasons[rule]
    assert "dead_relu" in reasons and "saturated_activation" in reasons
    assert "config/model" in reasons["loss_activation_mismatch"]
    assert {"nonfinite", "no_learning", "overfitting", "oscillating_loss"} <= set(d.rules_run)
    signals = d.signals
    assert signals.series("val/accuracy") is not None
    assert signals.epoch_end_steps.tolist() == [41 * (e + 1) for e in range(8)]
    assert signals.series("train/loss").steps.tolist() == signals.epoch_end_steps.tolist()
    assert any(t.startswith("hist/weights/") for t in signals.histograms)


def test_hparams_and_model_description_round_trip(offline):
    d = offline["oscillating_loss"]
    assert d.hparams == {"lr": 0.5, "momentum": 0.9}
    assert d.signals.model["output_activation"] == "softmax"
    assert d.metrics["val/accuracy"]["mode"] == "max"


def test_detection_table(trained, offline, capsys):
    """Prints the per-symptom detection table (run with -s to see it); docs/benchmarks.md states its figures.

    Fails on a buggy program whose symptom is missed (offline or live) and
    on a false alarm, and when the table of docs/benchmarks.md ("On the
    project's own programs") gives other figures than this run's.
    """
    _, lives, seconds = trained
    rows, alarms, missed = [], 0, []
    for p in programs.PROGRAMS + programs.STOCK:
        d, live = offline[p.name], lives[p.name]
        if p.target:
            hit = [f for f in d.by_id(p.target) if f.severity in ALARMS]
            onset = (f"epoch {hit[0].onset_epoch} / step {hit[0].onset_step}" if hit else "-")
            live_hit = [f for f in live.findings if f.id == p.target and f.severity in ALARMS]
            reported = live.reported_epoch[live_hit[0].key] if live_hit else "-"
            missed += [f"{p.name} ({where})" for where, found in (("offline", hit), ("live", live_hit))
                       if not found]
        else:
            hit, onset, reported = [], "-", "-"
        extra = sorted(_alarms(d.findings) - {p.target})
        alarms += 0 if p.target else len(extra)
        rows.append(f"{p.name:26s} {str(p.target or 'healthy'):26s} "
                    f"{'yes' if hit or not p.target else 'NO':4s} {onset:20s} {str(reported):6s} "
                    f"{seconds[p.name]:5.1f}s {', '.join(extra) or '-'}")
    with capsys.disabled():
        print("\nprogram                    target                     det  onset (offline)      "
              "live@  time   other warnings/errors")
        print("\n".join(rows))
    assert not missed, f"symptoms missed: {', '.join(missed)}"
    assert alarms == 0
    page = BENCHMARKS.read_text(encoding="utf-8")
    claims = [
        f"{len(programs.PROGRAMS + programs.STOCK)} small real training programs",
        f"| buggy programs detected with the right symptom | {len(BUGGY)} / {len(BUGGY)} "
        f"tfguard-layout, {len(STOCK_BUGGY)} / {len(STOCK_BUGGY)} stock-Keras-layout |",
        f"| false alarms (warning/error) on healthy programs | {alarms} / {len(HEALTHY)} in the suite;",
    ]
    stale = [claim for claim in claims if claim not in page]
    assert not stale, f"docs/benchmarks.md does not state this run's figures; expected: {stale}"
