"""The demo end to end, small: guarded, logged, diagnosed, exported, parity-checked."""

import json
import os
from pathlib import Path

import pytest

import tfguard
from tfguard._findings import SYMPTOMS
from tfguard._workflow import demo
from tfguard.diagnose import to_json


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    lines = []
    result = demo(str(root), epochs=2, max_samples=300, progress=lines.append)
    return root, result, lines


def test_demo_trains_guarded_and_logs_signals_from_the_guard(small_demo):
    root, result, lines = small_demo
    runs = tfguard.read_logdir(result.observed.logdir)
    assert len(runs) == 1
    run = next(iter(runs.values()))
    assert "train/loss" in run.scalars and "val/loss" in run.scalars
    assert "grad_norm/global" in run.scalars
    assert any(tag.startswith("activation/dead_fraction/") for tag in run.scalars)
    assert run.damage == []
    assert any(line.startswith("epoch 1/2") for line in lines)


def test_demo_writes_reports_and_a_projector(small_demo):
    root, result, _ = small_demo
    report = json.loads(Path(result.observed.report_json).read_text(encoding="utf-8"))
    assert report["schema"] == "tfguard.report/1"
    (run_report,) = report["runs"]
    (diagnosis,) = result.observed.diagnoses
    # the file is the diagnosis of the run's event files, not a stale or empty one
    assert run_report == json.loads(json.dumps(to_json([diagnosis])))["runs"][0]
    assert run_report["status"]["state"] == "completed" and run_report["rules_run"]
    assert {s["id"] for s in run_report["symptoms"]} <= set(SYMPTOMS)
    (run,) = tfguard.read_logdir(result.observed.logdir).values()
    steps, _, losses = run.scalars["train/loss"]
    assert len(steps) == 2  # one per epoch
    assert run_report["metrics"]["train/loss"]["final"] == pytest.approx(float(losses[-1]))
    html = Path(result.observed.report_html).read_text(encoding="utf-8")
    assert "<html" in html.lower() and "data:image/png;base64" in html
    assert diagnosis.run in html
    assert os.path.isfile(os.path.join(result.observed.run_dir, "projector_config.pbtxt"))


def test_demo_exports_and_parity_holds(small_demo):
    _, result, _ = small_demo
    assert result.demo.parity.ok
    result.demo.parity.check()
    export_dir = result.demo.export.export_dir
    for name in ("model.keras", "saved_model", "model.tflite", "contract.json"):
        assert os.path.exists(os.path.join(export_dir, name))
