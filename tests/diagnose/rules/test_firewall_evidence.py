"""Findings from the firewall's evidence (issue 41, item 1): a data violation is the record's, stage by stage fixes.

The program of the issue, as a new user writes it: 2,000 rows, one of them
all NaN, `guard(policy="skip")` and a Logger, three epochs. The diagnosis
names the input tensor and the example, says it came back in every epoch,
gives a fix in the data (no learning-rate advice, no advice to run under
the guard it already ran under), and lists it first. Its healthy twin (no
NaN row) gets no such finding; an overflowing learning rate gets a
gradient-stage `nonfinite` whose fix is the learning rate.
"""

from __future__ import annotations

import contextlib
import warnings

import keras
import numpy as np
import pytest

import tfguard
from tfguard.diagnose import diagnose_logdir

pytestmark = pytest.mark.slow


def _run(tmp_path, bad_row: bool, learning_rate: float = 1e-3):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2000, 10)).astype("float32")
    if bad_row:
        x[1234] = np.nan
    y = (x[:, 0] > 0).astype("float32")
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss="binary_crossentropy",
                  metrics=["accuracy"])
    tfguard.guard(model, policy="skip", quarantine_dir=str(tmp_path / "q"))
    # too many skips in a row stop the training (GuardViolation): its logs stay
    with warnings.catch_warnings(), contextlib.suppress(tfguard.GuardViolation):
        warnings.simplefilter("ignore")
        model.fit(x, y, epochs=3, batch_size=64, verbose=0,
                  callbacks=[tfguard.Logger(logdir=str(tmp_path / "runs"))])
    (report,) = diagnose_logdir(str(tmp_path / "runs"))
    return report


def test_one_nan_row_is_a_bad_record_named_listed_first_with_a_data_fix(tmp_path):
    report = _run(tmp_path, bad_row=True)
    first = report.findings[0]
    assert first.id == "bad_record" and first.where == "x", [f.id for f in report.findings]
    assert first.severity == "warning"  # skipped: the weights are safe
    assert "failed 'finite' (10 NaN, 0 +Inf, 0 -Inf of 640 values) in example" in first.message
    assert "came back in epochs 0, 1, 2: it is in your data, not a transient fault" in first.message
    assert first.evidence["came_back_in"] == [0, 1, 2]
    assert "drop or impute" in first.suggestion
    # what the rejected steps logged (their NaN gradient norms) is not the training's
    assert "nonfinite" not in [f.id for f in report.findings]
    assert not any("tfguard.guard(" in f.suggestion for f in report.findings)


def test_the_healthy_twin_has_no_bad_record(tmp_path):
    report = _run(tmp_path, bad_row=False)
    assert not [f for f in report.findings if f.id in ("bad_record", "nonfinite")]


def test_an_overflowing_rate_is_a_stage_finding_with_the_rate_as_its_fix(tmp_path):
    report = _run(tmp_path, bad_row=False, learning_rate=1e30)
    found = {f.id: f for f in report.findings}
    assert "bad_record" not in found
    nonfinite = found["nonfinite"]
    assert nonfinite.evidence.get("stage") in ("gradients", "update", "forward", "loss")
    assert "learning rate" in nonfinite.suggestion and "tfguard.guard(" not in nonfinite.suggestion
