"""`--try-fixes` for a trained-but-unused teacher: freeze it in the model that calls it.

The distillation program (keras-io's `Distiller`) runs under `try_fixes`:
the diagnosis finds the teacher trained by the distillation loss, the remedy
freezes it when the `Distiller` is compiled (the teacher's own `compile` and
`fit` before are left alone), and in the trial the teacher no longer moves.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.invariants import programs
from tfguard._findings import Finding
from tfguard.remedies import Intercept, remedies_for, try_fixes


def test_the_remedy_freezes_the_teacher_only_inside_the_distiller():
    finding = Finding("trained_unused", "warning", "teacher trained", where="teacher",
                      evidence={"freeze": ["teacher"]})
    (remedy,) = remedies_for(finding)
    with Intercept(remedy) as seen:
        model, x, y = programs.distiller(frozen=False)
        teacher_before = [w.copy() for w in model.teacher.get_weights()]
        model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    assert model.teacher.trainable is False
    assert all(np.array_equal(a, b) for a, b in zip(teacher_before, model.teacher.get_weights()))
    assert seen.changes == [f"teacher.trainable = False (in '{model.name}', before compile)"]
    assert remedies_for(Finding("trained_unused", "warning", "x")) == []  # nothing named to freeze
    (two,) = remedies_for(Finding("trained_unused", "warning", "x", evidence={"freeze": "a, b"}))
    assert two.title == "a, b.trainable = False before compile"


@pytest.mark.slow
def test_try_fixes_finds_the_trained_teacher_and_freezes_it(tmp_path):
    def train():
        model, x, y = programs.distiller(frozen=False)
        model.fit(x, y, epochs=2, batch_size=16, validation_split=0.25, verbose=0)

    result = try_fixes(train, logdir=tmp_path)
    assert [f.id for f in result.findings][:1] == ["trained_unused"]
    trial = next(t for t in result if t.remedy == "freeze_unused")
    assert trial.finding == "trained_unused" and trial.verdict != "not applied"
    assert trial.change.startswith("teacher.trainable = False")
