"""Diagnosis of unmodified, user-shaped scripts under `tfguard run`: root cause first, no false alarm.

Each case is one of the issue's findings on programs nobody here wrote,
re-created on programs of our own (`user_programs.py`): inputs that the
model itself handles (token ids into an `Embedding`, raw columns into an
adapted `Normalization`), a small 4-feature softmax MLP, labels the
firewall refuses, a softmax on multi-hot targets, a learning rate far too
high. The whole table (every program) is printed by
`benchmarks/diagnosis_user_programs.py`.
"""

from __future__ import annotations

import pytest

from . import user_programs as U

ALARMS = ("warning", "error")
PROGRAMS = {p.name: p for p in U.HEALTHY + U.BUGGY}


def _alarms(result) -> list:
    return [f for d in result.diagnoses for f in d.findings if f.severity in ALARMS]


@pytest.mark.parametrize("name", ["iris_softmax_mlp", "token_ids_embedding", "dict_inputs_normalization"])
def test_no_false_alarm_where_the_model_handles_its_input(tmp_path, name):
    result = U.run(PROGRAMS[name], tmp_path)
    assert result.exit_code == 0, result.traceback
    assert result.diagnoses and all(d.healthy for d in result.diagnoses)
    assert _alarms(result) == []


@pytest.mark.parametrize("name", ["fractional_labels", "softmax_multi_hot", "learning_rate_far_too_high",
                                  "raw_pixels_sgd"])
def test_the_root_cause_is_listed_first_and_explains_the_rest(tmp_path, name):
    program = PROGRAMS[name]
    result = U.run(program, tmp_path)
    alarms = _alarms(result)
    assert alarms and alarms[0].id == program.cause, [(f.id, f.severity) for f in alarms]
    for later in alarms[1:]:
        assert later.id in program.also or later.id == program.cause, later.id
        if later.cause is not None:  # a consequence names its cause, which is listed before it
            assert later.cause in [f.key for f in alarms[: alarms.index(later)]]
            assert "most likely because" in later.message
    if program.cause == "learning_rate":
        assert "Adam's learning rate is 1" in alarms[0].message  # the value, not only the symptom
