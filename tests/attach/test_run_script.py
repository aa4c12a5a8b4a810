"""`run_script`: real scripts run as `python SCRIPT` would, attached; exit status and reports."""

from __future__ import annotations

import json
import os
import re
import sys

import keras
import pytest

from tfguard._errors import GuardViolation
from tfguard.attach import ScriptError, run_script
from tfguard.diagnose import SCHEMA, SYMPTOMS, diagnose_logdir

from .scripts import ARGV, EXITS, EXPLODING, HEALTHY, LOOP, MISMATCH, RAISES, write

SYMPTOM_FIELDS = {"id", "severity", "message", "where", "evidence", "suggestion"}


def load(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_a_healthy_script_runs_unchanged_and_is_reported_healthy(tmp_path, capsys):
    script = write(tmp_path, HEALTHY, epochs=4)
    result = run_script(script, logdir=tmp_path / "runs", html=tmp_path / "report.html")
    out = capsys.readouterr().out
    assert result.exit_code == 0
    # The script's own line, and its History without the guard's counters.
    assert "SCRIPT-SAYS history keys ['accuracy', 'loss', 'val_accuracy', 'val_loss']" in out
    doc = load(result.report_path)
    assert result.report_path == str(tmp_path / "runs" / "report.json")
    assert doc["schema"] == SCHEMA and doc["exit_code"] == 0 and doc["error"] is None
    assert doc["script"] == {"path": str(script), "argv": [str(script)]}
    (run,) = doc["runs"]
    assert run["run"] == "digits_mlp-fit1"
    assert run["hparams"]["optimizer"] == "Adam" and run["hparams"]["epochs"] == 4
    assert [s for s in run["symptoms"] if s["severity"] in ("warning", "error")] == []
    assert doc["guard_events"] == [] and doc["fits"][0]["guarded"] is True
    assert os.path.getsize(result.html_path) > 1000
    assert keras.Model.fit.__qualname__ == "TensorFlowTrainer.fit"  # restored


def test_a_healthy_script_writes_event_files_per_fit(tmp_path):
    script = write(tmp_path, HEALTHY, epochs=2)
    result = run_script(script, logdir=tmp_path / "runs")
    assert result.exit_code == 0
    run_dir = tmp_path / "runs" / "digits_mlp-fit1"
    assert result.fits[0].run_dir == str(run_dir)
    events = [p for p in run_dir.rglob("*") if "tfevents" in p.name]
    assert events, f"no event file under {run_dir}"
    # The same rules over the event files agree with the live diagnosis.
    (offline,) = diagnose_logdir(str(tmp_path / "runs"))
    assert offline.run == "digits_mlp-fit1" and offline.ids == result.diagnoses[0].ids == []


def test_an_exploding_script_keeps_finite_weights_and_reports_nonfinite(tmp_path, capsys):
    script = write(tmp_path, EXPLODING)
    lines = []
    result = run_script(script, logdir=tmp_path / "runs", logger=False, progress=lines.append)
    assert result.exit_code == 0
    assert "SCRIPT-SAYS finite weights True" in capsys.readouterr().out  # policy warn
    doc = load(result.report_path)
    ids = [s["id"] for s in doc["runs"][0]["symptoms"]]
    assert "nonfinite" in ids
    for symptom in doc["runs"][0]["symptoms"]:
        assert set(symptom) >= SYMPTOM_FIELDS and symptom["id"] in SYMPTOMS
    events = doc["guard_events"]
    assert events and events[0]["run"] == "hot-fit1" and events[0]["action"] == "warned"
    assert events[0]["stage"] in ("loss", "gradients", "forward")
    assert events[0]["quarantine"].startswith(str(tmp_path / "runs" / "quarantine"))
    assert any(line.startswith("tfguard: hot-fit1: guard warned:") for line in lines)


def test_a_loss_that_does_not_fit_the_output_is_named(tmp_path):
    script = write(tmp_path, MISMATCH)
    result = run_script(script, logdir=tmp_path / "runs", logger=False)
    assert result.exit_code == 0
    symptoms = load(result.report_path)["runs"][0]["symptoms"]
    (mismatch,) = [s for s in symptoms if s["id"] == "loss_activation_mismatch"]
    assert mismatch["severity"] == "warning" and "sigmoid" in mismatch["message"]
    assert mismatch["where"] and mismatch["suggestion"]


def test_sys_exit_keeps_its_status_and_the_report_is_written(tmp_path, capsys):
    script = write(tmp_path, EXITS, code=3)
    result = run_script(script, logdir=tmp_path / "runs", logger=False)
    assert result.exit_code == 3 and result.exception is None
    assert "SCRIPT-SAYS before exit" in capsys.readouterr().out
    doc = load(result.report_path)
    assert doc["exit_code"] == 3 and [r["run"] for r in doc["runs"]] == ["tiny-fit1"]


def test_sys_exit_with_text_exits_1_with_the_text(tmp_path):
    script = write(tmp_path, 'import sys\nsys.exit("bad config")\n')
    result = run_script(script, logdir=tmp_path / "runs", logger=False)
    assert (result.exit_code, result.exit_message) == (1, "bad config")
    assert "the script called no keras.Model.fit" in " ".join(load(result.report_path)["notes"])


def test_an_uncaught_exception_exits_1_with_the_scripts_traceback(tmp_path):
    script = write(tmp_path, RAISES)
    result = run_script(script, logdir=tmp_path / "runs", logger=False)
    assert result.exit_code == 1 and isinstance(result.exception, ValueError)
    text = result.traceback
    assert text.startswith("Traceback (most recent call last):\n")
    assert f'File "{script}", line' in text and "in broken" in text
    assert "runpy" not in text and "tfguard" not in text
    assert text.rstrip().endswith("ValueError: boom from the script")
    doc = load(result.report_path)
    assert doc["exit_code"] == 1
    assert doc["error"] == {"type": "ValueError", "message": "boom from the script"}
    assert doc["runs"][0]["run"] == "tiny-fit1"


def test_argv_name_and_path_are_those_of_python_script(tmp_path, capsys):
    script = write(tmp_path, ARGV, name="show.py")
    saved_argv, saved_path = list(sys.argv), list(sys.path)
    result = run_script(script, ["--epochs", "3", "-v", "pos"], logdir=tmp_path / "runs")
    seen = json.loads(capsys.readouterr().out)
    assert result.exit_code == 0
    assert seen == {"argv": [str(script), "--epochs", "3", "-v", "pos"], "name": "__main__",
                    "path0": str(script.parent.resolve()), "file": str(script)}
    assert (sys.argv, sys.path) == (saved_argv, saved_path)


def test_a_missing_script_is_a_typed_error(tmp_path):
    with pytest.raises(ScriptError, match="expected a Python script file"):
        run_script(tmp_path / "nope.py", logdir=tmp_path / "runs")


def test_policy_raise_stops_the_script_with_the_guards_exit_status(tmp_path):
    script = write(tmp_path, EXPLODING)
    result = run_script(script, logdir=tmp_path / "runs", logger=False, policy="raise")
    assert result.exit_code == GuardViolation.exit_code == 3
    assert isinstance(result.exception, GuardViolation)
    assert "tfguard._errors.GuardViolation: loss at batch 3 (epoch 0, batch 3 of the epoch)" in result.traceback
    assert f'File "{script}", line' in result.traceback and "attach/_session.py" not in result.traceback
    doc = load(result.report_path)
    assert doc["error"]["type"] == "GuardViolation"
    assert [e["action"] for e in doc["guard_events"]] == ["raised"]
    assert doc["fits"][0]["error"].startswith("GuardViolation")


def test_ctrl_c_in_the_script_exits_130(tmp_path):
    script = write(tmp_path, "raise KeyboardInterrupt\n")
    result = run_script(script, logdir=tmp_path / "runs", logger=False)
    assert result.exit_code == 130 and "KeyboardInterrupt" in result.traceback


def test_a_hand_written_loop_is_guarded_too(tmp_path, capsys):
    result = run_script(write(tmp_path, LOOP), logdir=tmp_path / "runs", logger=False)
    out = capsys.readouterr().out
    assert result.exit_code == 0
    assert "SCRIPT-SAYS finite weights True" in out
    assert "SCRIPT-SAYS iterations 9" in out  # the NaN batch's update was rolled back with its step
    # the rejected update is a finding of the loop's run (it used to be a note only, then a run of its own)
    (run,) = result.diagnoses
    assert run.run == "looped-loop" and [f.kind for f in result.fits] == ["loop"]
    (finding,) = [f for f in run.findings if f.severity == "warning"]
    assert finding.id == "nonfinite" and re.match(r"adam(_\d+)?$", finding.where)
    assert finding.evidence["rejected_updates"] == 1 and "outside fit" in finding.message
