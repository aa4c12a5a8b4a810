"""The tab's script draws every run it can: a bad run or report costs its own section (issue 46, item 5).

`index.js` runs in Node (`frontend.mjs`: a small stand-in for the DOM and
`fetch`) on a `runs` answer of the real plugin, made worse by hand where a
field has a type no tfguard server sends (`"trials": [null]`, `"symptoms": 5`),
as a hand-edited file or an older or newer server could give.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import shutil
import subprocess

import pytest
from tensorboard.plugins import base_plugin

from tests.board.test_bad_inputs import TRIAL, _runs, _write
from tfguard.board import TfguardPlugin

NODE = shutil.which("node")
HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frontend.mjs")

pytestmark = pytest.mark.skipif(NODE is None, reason="Node.js not installed")


def _draw(answer: dict, tmp_path) -> dict:
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(answer), encoding="utf-8")
    index = str(importlib.resources.files("tfguard.board").joinpath("static", "index.js"))
    done = subprocess.run([NODE, HARNESS, index, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_run_and_a_report_of_unexpected_shape_cost_only_their_own_sections(tmp_path):
    _runs(tmp_path / "logs", "healthy", "diverged", "odd")
    _write(tmp_path / "logs" / "report.json", {"runs": [{"run": "healthy"}], "trials": [TRIAL]})
    _write(tmp_path / "logs" / "deep" / "report.json", "[" * 100_000 + "]" * 100_000)
    answer = TfguardPlugin(base_plugin.TBContext(logdir=str(tmp_path / "logs"))).runs_answer()
    odd = next(r for r in answer["runs"] if r["run"] == "odd")
    odd.update(symptoms=5, metrics={"train/loss": None}, violations="x", notes=None)
    answer["runs"].append({"run": "bare"})  # a run with none of its fields
    answer["trials"].append({"report": "old/report.json", "runs": 5, "trials": [None, TRIAL]})
    drawn = _draw(answer, tmp_path)
    assert drawn["top"] == ["page"], drawn  # not "tfguard could not read the diagnoses"
    by_class = [(s["cls"], s["text"]) for s in drawn["sections"]]
    runs = [text for cls, text in by_class if cls.startswith("run ")]
    assert any(t.startswith("healthy") for t in runs) and any(t.startswith("diverged") for t in runs)
    assert any(t.startswith("odd") for t in runs) and any("bare" in t for t in runs)
    trials = [text for cls, text in by_class if cls == "trials"]
    assert any("deep/report.json was not read: its JSON is nested deeper" in t for t in trials)
    assert any("old/report.json" in t and "nonfinite" in t for t in trials)
    assert sum("clipnorm=1.0" in t for t in trials) == 2


def test_a_run_the_plugin_marks_unreadable_shows_why(tmp_path, monkeypatch):
    from tfguard.board import _cache

    _runs(tmp_path / "logs", "healthy", "broken")
    real = _cache.diagnose
    monkeypatch.setattr(_cache, "diagnose", lambda s, **k: (_ for _ in ()).throw(
        ValueError("bad data")) if s.run == "broken" else real(s, **k))
    answer = TfguardPlugin(base_plugin.TBContext(logdir=str(tmp_path / "logs"))).runs_answer()
    drawn = _draw(answer, tmp_path)
    [broken] = [s for s in drawn["sections"] if s["text"].startswith("broken")]
    assert broken["cls"] == "run kind-unreadable"
    assert "could not read or diagnose this run (ValueError: bad data)" in broken["text"]
