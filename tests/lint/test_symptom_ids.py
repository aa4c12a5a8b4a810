import json

import numpy as np
import pytest

from tfguard._errors import ContractError
from tfguard._findings import SYMPTOMS, Finding, severity_rank, strict_json, worst_severity
from tfguard.lint import _symptom_ids as symptom_ids_module
from tfguard.lint._symptom_ids import SYMPTOM_IDS


def make(severity="warning", **evidence):
    return Finding("label_range", severity, "msg", "here", {"code": "c", **evidence}, "fix")


def test_fields_code_and_dict():
    f = make()
    assert f.code == "c"
    assert f.to_dict() == {
        "id": "label_range",
        "severity": "warning",
        "message": "msg",
        "where": "here",
        "evidence": {"code": "c"},
        "suggestion": "fix",
        "onset_step": None,
        "onset_epoch": None,
        "cause": None,
    }


def test_evidence_becomes_strict_json():
    f = make(max=np.int64(10), mean=np.float32(0.5), shape=(2, 3), bad=float("nan"), arr=np.eye(2))
    text = json.dumps(strict_json(f.to_dict()), allow_nan=False)
    evidence = json.loads(text)["evidence"]
    assert evidence["max"] == 10 and isinstance(evidence["max"], int)
    assert evidence["shape"] == [2, 3]
    assert evidence["bad"] == "NaN" and np.isnan(f.evidence["bad"])  # a number until it is JSON
    assert evidence["arr"] == [[1.0, 0.0], [0.0, 1.0]]


@pytest.mark.parametrize("severity", ["fatal", "WARNING", "", None])
def test_bad_severity_raises_with_received_value(severity):
    with pytest.raises(ContractError, match="severity"):
        make(severity=severity)


def test_empty_id_raises():
    with pytest.raises(ContractError, match="id"):
        Finding("", "info", "m", "w")


def test_worst_severity_and_rank():
    assert worst_severity([]) is None
    assert worst_severity([make("info"), make("error"), make("warning")]) == "error"
    assert worst_severity([make("info")]) == "info"
    assert severity_rank("info") < severity_rank("warning") < severity_rank("error")


def test_every_id_the_lint_room_names_is_a_published_symptom():
    named = set(SYMPTOM_IDS) | {value for name, value in vars(symptom_ids_module).items()
                                if name.isupper() and isinstance(value, str)}
    unpublished = sorted(named - set(SYMPTOMS))
    assert not unpublished, f"lint names symptom ids missing from tfguard._findings.SYMPTOMS: {unpublished}"
