"""The invariant rules are pure: a record in, a finding out; no record, the rule is skipped."""

from __future__ import annotations

import json

import pytest

from tfguard import _tags
from tfguard.diagnose import diagnose
from tfguard.diagnose._causes import INVARIANTS
from tfguard.diagnose._inputs.signals import Signals
from tfguard.diagnose._rules.invariants import evidence_of

RECORDS = {
    "labels_ignored": ({"loss": 0.3, "loss_other_labels": 0.3, "relative_change": 0.0,
                        "loss_override": True}, "model", "error", "`compute_loss` override"),
    "untrained_variable": ({"variables": ["gate/kernel", "gate/bias"], "count": 2, "trainable": 6,
                            "read_at_inference": ["gate/kernel"]}, "gate/kernel", "warning",
                           "'gate/kernel', 'gate/bias'"),
    "trained_unused": ({"variables": ["teacher/dense/kernel"], "count": 1, "parameters": 64,
                        "layers": ["teacher/dense"], "freeze": ["teacher"],
                        "attributes": ["teacher"]}, "teacher", "warning",
                       "`self.teacher.trainable = False`"),
    "batch_dependence": ({"examples": 4, "batch": 32, "relative_change": 0.2, "compared": "alone",
                          "layer_class": None, "after_layer": "net/movie_bias"}, "net", "error",
                         "after layer 'net/movie_bias'"),
    "training_mode_leak": ({"code": "random_at_inference", "relative_change": 0.6,
                            "layer_class": "Dropout", "known_training_layer": True}, "dropout",
                           "error", "`training=True` is hard-coded"),
    "collapsed_output": ({"spread": 0.0, "magnitude": 0.5, "examples": 32, "features": 8},
                         "Embedding", "warning", "same for all 32 examples"),
}


def _signals(*records):
    return Signals(texts={_tags.INVARIANT_RECORDS: [(r["step"], json.dumps(r)) for r in records]})


@pytest.mark.parametrize("check", sorted(RECORDS))
def test_a_failed_record_is_one_finding_with_its_evidence(check):
    evidence, where, severity, text = RECORDS[check]
    clean = {"check": check, "ok": True, "where": None, "evidence": {}, "step": 1, "epoch": 0}
    failed = {"check": check, "ok": False, "where": where, "evidence": evidence, "step": 7,
              "epoch": 1}
    d = diagnose(_signals(clean, failed, {**failed, "step": 9}), rules=[check])
    (finding,) = d.findings
    assert (finding.id, finding.where, finding.severity) == (check, where, severity)
    assert (finding.onset_step, finding.onset_epoch) == (7, 1)  # the first failure
    assert text in finding.message + finding.suggestion
    assert finding.evidence == evidence_of(evidence)  # numbers and text, as the report schema says
    assert all(isinstance(v, (int, float, str)) for v in finding.evidence.values())


def test_clean_records_give_nothing_and_no_records_skip_the_rules():
    clean = [{"check": c, "ok": True, "where": None, "evidence": {}, "step": 1, "epoch": 0}
             for c in INVARIANTS]
    d = diagnose(_signals(*clean), rules=list(INVARIANTS))
    assert d.findings == [] and sorted(d.rules_run) == sorted(INVARIANTS)
    d = diagnose(Signals(), rules=list(INVARIANTS))
    assert sorted(d.skipped_ids) == sorted(INVARIANTS)
    assert all("did not run" in s["reason"] for s in d.rules_skipped)


def test_a_sampling_layer_at_inference_is_a_remark_not_an_alarm():
    record = {"check": "training_mode_leak", "ok": False, "where": "vae/sampling", "step": 1,
              "epoch": 0, "evidence": {"code": "random_at_inference", "relative_change": 0.4,
                                       "layer_class": "Sampling", "known_training_layer": False}}
    (finding,) = diagnose(_signals(record), rules=["training_mode_leak"]).findings
    assert finding.severity == "info" and "Sampling" in finding.message
