"""Memory across many runs (issue 46, item 6): bounded however many runs a logdir holds.

`tfguard diagnose` reads and diagnoses one run at a time; `tfguard watch`
keeps every run it follows, in compact buffers, under one tag budget over
the logdir (`MAX_WATCHED_TAGS`), the loss and metrics exempt. Before, 20
runs x 60k tags took 2.2 GB in diagnose and 2.7 GB in watch
(`benchmarks/edge_limits.py` measures it at that size).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.events.test_many_tags import MEASURE, _one_point_tags
from tests.watch.logs import EVENT_FILE, append, epoch_records, losses, scalar
from tfguard.watch import Watcher, _runs


def _layer_tags(path, count: int) -> None:
    """`count` one-point tags `grad_norm/layer_NNNN` (per-layer: not exempt from the budget)."""
    append(path, b"".join(scalar(f"grad_norm/layer_{k:04d}", 1, 0.5) for k in range(count)))


def test_the_runs_of_a_watch_share_one_tag_budget_and_keep_their_loss(tmp_path, monkeypatch):
    monkeypatch.setattr(_runs, "MAX_WATCHED_TAGS", 150)
    for name in ("a", "b", "c"):
        _layer_tags(tmp_path / name / EVENT_FILE, 100)
        for epoch, loss in enumerate(losses(6, nan_at=4)):
            append(tmp_path / name / EVENT_FILE, epoch_records(epoch, loss))
    watcher = Watcher(tmp_path)
    events = watcher.poll()
    damage = {e.run: e.text for e in events if e.kind == "damage"}
    assert sorted(damage) == ["b", "c"]  # a's 105 tags fit; b got 45 of its layer tags; c none
    assert all("more than 150 distinct tags in the runs read together" in t and "fewer runs" in t
               for t in damage.values())
    found = {(e.run, e.finding.id) for e in events if e.kind == "finding"}
    assert {("a", "nonfinite"), ("b", "nonfinite"), ("c", "nonfinite")} <= found  # loss still read
    budget = watcher.follower.budget
    # a: 100 layer tags + batch/loss, grad_norm/global, train/loss, val/loss, train/epoch;
    # b: 45 layer tags, then only the 4 exempt ones; c: the 4 exempt ones
    assert budget.used == 105 + 45 + 4 + 4
    os.truncate(tmp_path / "a" / EVENT_FILE, 0)  # a rewritten file: run a is read again from 0
    append(tmp_path / "a" / EVENT_FILE, epoch_records(0, 2.3))
    watcher.poll()
    assert budget.used == 45 + 4 + 4 + 5  # a's 105 tags given back, its 5 new ones charged


def test_watch_once_reports_tags_past_the_budget(tmp_path, monkeypatch, capsys):
    from tfguard._cli import main

    monkeypatch.setattr(_runs, "MAX_WATCHED_TAGS", 50)
    _layer_tags(tmp_path / "a" / EVENT_FILE, 100)
    assert main(["watch", str(tmp_path), "--once"]) == 0
    assert "50 value(s) of later tags were not read" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="peak RSS read from /proc")
@pytest.mark.parametrize("argv", [["diagnose"], ["watch", "--once"]])
def test_eight_runs_of_30k_tags_stay_within_300_mb(tmp_path, argv):
    for i in range(8):
        _one_point_tags(str(tmp_path / "logs" / f"run_{i}" / EVENT_FILE), 30_000)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    code = MEASURE.replace('main(["diagnose", sys.argv[1]])', "main(sys.argv[1:])")
    done = subprocess.run([sys.executable, "-c", code, argv[0], str(tmp_path / "logs"), *argv[1:]],
                          capture_output=True, text=True, env=env, timeout=600)
    line = [x for x in done.stdout.splitlines() if x.startswith("MEASURED")][-1]
    _, status, max_rss_kb, _seconds = line.split()
    assert int(status) == 0, done.stderr[-2000:]
    assert int(max_rss_kb) < 300 * 1024, max_rss_kb  # before: about 550 MB and 700 MB
