"""Inputs crafted to take the tab down cost only their own part of it (issue 46, item 5).

A `report.json` that is not what `tfguard run --try-fixes` writes (`"runs": 5`,
JSON nested past the parser's limit, `"trials": [null]`, a FIFO, a file of
more than `MAX_REPORT_BYTES`) is listed with the reason it was refused; a run
whose diagnosis raises is shown `unreadable`; the rest of the tab is
answered, quickly and small. The event files are real TFRecord frames
(`tests.watch.logs`); no TensorFlow is needed.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tests.watch.logs import EVENT_FILE, append, epoch_records, losses
from tfguard.board import TfguardPlugin, _cache
from tfguard.board._reports import MAX_REPORT_BYTES, MAX_TRIALS

TRIAL = {"remedy": "clipnorm", "finding": "nonfinite", "where": None, "change": "clipnorm=1.0",
         "measure": "val_loss", "before": "NaN", "after": 0.5, "verdict": "improved", "fix": True,
         "margin": 0.05, "epochs": 3, "run_dir": "try-1-clipnorm", "curves": {"before": {}},
         "notes": [], "seconds": 1.5}


def _runs(logdir, *names: str) -> None:
    for name in names:
        for epoch, loss in enumerate(losses(6, nan_at=4 if name == "diverged" else None)):
            append(logdir / name / EVENT_FILE, epoch_records(epoch, loss))


def _write(path, doc) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))


def _folder(root, name: str):
    os.makedirs(root / name, exist_ok=True)
    return root / name


def _answer(logdir, timeout: float = 60):
    """`(status, JSON)` of the `runs` route, asked on a thread so that a hang fails the test."""
    plugin = TfguardPlugin(base_plugin.TBContext(logdir=str(logdir)))
    apps = plugin.get_plugin_apps()
    got = []
    thread = threading.Thread(target=lambda: got.append(Client(
        lambda environ, start: apps[environ["PATH_INFO"]](environ, start)).get("/runs")),
        daemon=True)
    thread.start()
    thread.join(timeout)
    assert got, f"the runs route did not answer within {timeout} s"
    return got[0].status_code, got[0].get_data()


def test_bad_report_files_are_listed_with_why_and_the_runs_are_shown(tmp_path):
    _runs(tmp_path, "healthy", "diverged")
    _write(tmp_path / "report.json", {"runs": 5, "trials": [TRIAL]})
    _write(tmp_path / "deep" / "report.json", "[" * 100_000 + "]" * 100_000)
    _write(tmp_path / "nulls" / "report.json", {"runs": [{"run": "healthy"}], "trials": [None, TRIAL]})
    _write(tmp_path / "text" / "report.json", "not json")
    _write(tmp_path / "typed" / "report.json", {"trials": {"a": 1}})
    os.mkfifo(_folder(tmp_path, "fifo") / "report.json")
    with open(_folder(tmp_path, "huge") / "report.json", "wb") as f:
        f.truncate(MAX_REPORT_BYTES + 1)  # sparse: no disk used
    status, body = _answer(tmp_path)
    assert status == 200, body[:500]
    doc = json.loads(body)
    assert {r["run"]: r["kind"] for r in doc["runs"]} == {"healthy": "little_evidence", "diverged": "error"}
    reports = {r["report"]: r for r in doc["trials"]}
    top = reports["report.json"]
    assert top["error"] is None and top["runs"] == [] and top["trials"][0]["finding"] == "nonfinite"
    assert "curves" not in top["trials"][0]
    nulls = reports["nulls/report.json"]
    assert (nulls["trial_count"], nulls["skipped"], len(nulls["trials"])) == (2, 1, 1)
    why = {name: reports[f"{name}/report.json"]["error"] for name in ("deep", "text", "typed", "fifo", "huge")}
    assert "nested deeper" in why["deep"] and "not JSON" in why["text"]
    assert "`trials` is a dict" in why["typed"] and "not a regular file" in why["fifo"]
    assert f"more than the {MAX_REPORT_BYTES:,}" in why["huge"]


def test_a_big_report_costs_neither_time_nor_a_big_answer(tmp_path):
    _runs(tmp_path, "healthy")
    big = {"runs": [{"run": "healthy"}], "trials": [dict(TRIAL, change="x" * 50_000)] * 300}
    _write(tmp_path / "report.json", big)
    assert os.path.getsize(tmp_path / "report.json") > 14e6
    began = time.perf_counter()
    status, body = _answer(tmp_path)
    assert status == 200 and len(body) < 1_000_000, len(body)
    [report] = json.loads(body)["trials"]
    assert report["trial_count"] == 300 and len(report["trials"]) == MAX_TRIALS
    assert report["trials"][0]["change"].endswith("…") and len(report["trials"][0]["change"]) == 2000
    first = time.perf_counter() - began
    began = time.perf_counter()
    assert _answer(tmp_path)[0] == 200  # a new plugin: parsed again; the same plugin keeps it
    assert first < 30 and time.perf_counter() - began < 30


def test_a_report_file_is_parsed_once_per_change(tmp_path):
    _runs(tmp_path, "healthy")
    _write(tmp_path / "report.json", {"trials": [TRIAL]})
    plugin = TfguardPlugin(base_plugin.TBContext(logdir=str(tmp_path)))
    path = tmp_path / "report.json"
    first = plugin.runs_answer()["trials"]
    before = os.stat(path)
    text = path.read_text(encoding="utf-8").replace("nonfinite", "nonfinitX")
    with open(path, "r+", encoding="utf-8") as f:  # same size, same mtime: not read again
        f.write(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert plugin.runs_answer()["trials"] == first
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1))  # touched: read again
    assert plugin.runs_answer()["trials"][0]["trials"][0]["finding"] == "nonfinitX"


def test_a_run_whose_diagnosis_raises_is_shown_unreadable_and_the_others_are_shown(
        tmp_path, monkeypatch):
    _runs(tmp_path, "healthy", "broken")
    real = _cache.diagnose

    def diagnose(signals, **kwargs):  # a rule's bug met on one run's data
        if signals.run == "broken":
            raise IndexError("index 3 is out of bounds for axis 0 with size 3")
        return real(signals, **kwargs)

    monkeypatch.setattr(_cache, "diagnose", diagnose)
    status, body = _answer(tmp_path)
    assert status == 200, body[:500]
    runs = {r["run"]: r for r in json.loads(body)["runs"]}
    assert runs["healthy"]["kind"] == "little_evidence"  # two signals: never called healthy
    broken = runs["broken"]
    assert broken["kind"] == "unreadable" and broken["healthy"] is False
    assert "IndexError: index 3 is out of bounds" in broken["headline"]
    assert broken["symptoms"] == [] and broken["violations"] == []


@pytest.mark.parametrize("query", ["sort_by=" + "x" * 600, "sort_by=a%00b"])
def test_an_unreasonable_sort_by_is_answered_400(tmp_path, query):
    _runs(tmp_path, "healthy", "diverged")
    plugin = TfguardPlugin(base_plugin.TBContext(logdir=str(tmp_path)))
    apps = plugin.get_plugin_apps()
    answer = Client(lambda environ, start: apps[environ["PATH_INFO"]](environ, start)).get(
        "/runs?" + query)
    assert answer.status_code == 400 and "sort_by" in answer.get_json()["error"]
