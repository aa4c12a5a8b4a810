"""The plugin's routes in process (werkzeug's test client, a real `TBContext`): the cache, a running job."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from tensorboard.plugins import base_plugin
from werkzeug.test import Client

from tfguard.board import TfguardPlugin
from tfguard.events._records import frame_record

from ..events.eventdata import scalar_event
from .conftest import RUNS


def client(plugin: TfguardPlugin) -> Client:
    apps = plugin.get_plugin_apps()
    return Client(lambda environ, start: apps[environ["PATH_INFO"]](environ, start))


@pytest.fixture
def logdir(board_logdir, tmp_path):
    """A copy of the shared log directory that a test may change."""
    return shutil.copytree(board_logdir, tmp_path / "logs")


def _event_file(logdir, run: str) -> str:
    folder = os.path.join(logdir, run)
    (name,) = [n for n in os.listdir(folder) if "tfevents" in n]
    return os.path.join(folder, name)


def _runs(c: Client) -> dict:
    answer = c.get("/runs")
    assert answer.status_code == 200
    return {run["run"]: run for run in answer.get_json()["runs"]}


def test_an_unchanged_logdir_is_not_read_again(logdir):
    plugin = TfguardPlugin(base_plugin.TBContext(logdir=str(logdir)))
    c = client(plugin)
    first = _runs(c)
    reads = plugin.cache.reads
    assert reads == 6  # 4 tfguard runs (the hostile one too), the Keras run's train/ and validation/
    again = _runs(c)
    for run in (*first.values(), *again.values()):
        run.pop("age_s")  # the one field that moves with the clock
    assert again == first and plugin.cache.reads == reads


def test_a_run_that_grows_is_read_again_alone_and_shows_what_is_known_so_far(logdir):
    plugin = TfguardPlugin(base_plugin.TBContext(logdir=str(logdir)))
    c = client(plugin)
    before = _runs(c)
    kept = {d.run: d for d in plugin.cache.diagnoses()}
    assert before[RUNS["healthy"]]["kind"] == "healthy"
    record = frame_record(scalar_event("train/loss", 10_000, float("nan")).SerializeToString())
    path = _event_file(logdir, RUNS["healthy"])
    reads = plugin.cache.reads
    with open(path, "ab") as f:  # the writer is half way through the record: it is not read yet
        f.write(record[: len(record) // 2])
    half = _runs(c)
    assert plugin.cache.reads == reads + 1
    assert half[RUNS["healthy"]]["symptoms"] == before[RUNS["healthy"]]["symptoms"]
    with open(path, "ab") as f:  # the rest arrives: the non-finite loss is diagnosed
        f.write(record[len(record) // 2:])
    after = _runs(c)
    assert plugin.cache.reads == reads + 2
    assert after[RUNS["healthy"]]["kind"] == "error"
    assert "nonfinite" in [f["id"] for f in after[RUNS["healthy"]]["symptoms"]]
    now = {d.run: d for d in plugin.cache.diagnoses()}
    assert all(now[run] is kept[run] for run in kept if run != RUNS["healthy"])  # not diagnosed again
    assert after[RUNS["healthy"]]["age_s"] < 60  # its file was just written
    assert after[RUNS["healthy"]]["ended"] is False  # and no end was logged: the tab says "being written"
    assert after[RUNS["guarded"]]["ended"] is True  # tfguard's Logger logged its end
    assert after[RUNS["stock"]]["ended"] is None  # Keras's callback never says


def test_a_removed_run_leaves_and_a_new_one_comes(logdir):
    plugin = TfguardPlugin(base_plugin.TBContext(logdir=str(logdir)))
    c = client(plugin)
    assert RUNS["guarded"] in _runs(c)
    shutil.move(os.path.join(logdir, RUNS["guarded"]), os.path.join(logdir, "renamed"))
    runs = _runs(c)
    assert RUNS["guarded"] not in runs and runs["renamed"]["violation_count"] == 4


def test_is_active_only_with_runs(tmp_path, board_logdir):
    assert TfguardPlugin(base_plugin.TBContext(logdir=board_logdir)).is_active()
    assert not TfguardPlugin(base_plugin.TBContext(logdir=str(tmp_path))).is_active()
    missing = TfguardPlugin(base_plugin.TBContext(logdir=str(tmp_path / "nope")))
    assert not missing.is_active() and _runs(client(missing)) == {}
    assert not TfguardPlugin(base_plugin.TBContext(logdir=None)).is_active()


def test_ranking_by_another_metric(board_logdir):
    c = client(TfguardPlugin(base_plugin.TBContext(logdir=board_logdir)))
    ranking = c.get("/runs?sort_by=val/loss").get_json()["ranking"]
    assert ranking["sort_by"] == "val/loss"
    values = [r["sort_value"] for r in ranking["rows"] if r["sort_value"] is not None]
    assert values == sorted(values)  # loss-like: lowest first


def test_the_plugin_never_imports_tensorflow_or_keras(board_logdir):
    code = ("import sys\n"
            "from tensorboard.plugins import base_plugin\n"
            "from tfguard.board import TfguardPlugin\n"
            f"doc = TfguardPlugin(base_plugin.TBContext(logdir={board_logdir!r})).runs_answer()\n"
            "assert len(doc['runs']) == 5, doc\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
