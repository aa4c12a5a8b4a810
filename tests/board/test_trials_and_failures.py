"""The tab on what a run does past training: the fixes `tfguard run --try-fixes` tried, a run that failed."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from tensorboard.plugins import base_plugin

from tfguard.board import TfguardPlugin

from ..remedies.test_cli_try_fixes import SCRIPT
from .devtools import chromium, needs_chromium

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """A `tfguard run --try-fixes` log directory (one trial), plus a guarded run that raised."""
    import keras

    from tfguard import GuardViolation, Logger, guard
    from tfguard._cli import main

    root = tmp_path_factory.mktemp("tried")
    script, runs = root / "train.py", root / "runs"
    script.write_text(SCRIPT)
    assert main(["run", "--try-fixes", "--max-trials", "1", "--quiet", "--logdir", str(runs),
                 str(script)]) == 0
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(128, 4)).astype("float32")
    x[70] = np.nan  # batch 2
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="out")])
    model.compile(keras.optimizers.SGD(0.01), "mse")
    model = guard(model, policy="raise", quarantine_dir=str(root / "quarantine"))
    with pytest.raises(GuardViolation):
        model.fit(x, np.zeros((128, 2), "float32"), batch_size=32, epochs=2, verbose=0,
                  callbacks=[Logger(str(runs / "raised"), run_subdir=False, scalars_every=1)])
    return str(runs)


def test_the_tried_fixes_come_from_the_report_of_try_fixes(logdir):
    doc = TfguardPlugin(base_plugin.TBContext(logdir=logdir)).runs_answer()
    with open(os.path.join(logdir, "report.json"), encoding="utf-8") as f:
        report = json.load(f)
    [tried] = doc["trials"]
    shown = [{k: v for k, v in t.items() if k != "curves"} for t in report["trials"]]  # not drawn
    assert tried["report"] == "report.json" and tried["trials"] == shown and tried["error"] is None
    assert tried["runs"] == [r["run"] for r in report["runs"]]
    [trial] = tried["trials"]
    assert (trial["finding"], trial["verdict"]) == ("unnormalized_input", "improved")
    runs = {r["run"] for r in doc["runs"]}
    assert any(name.startswith("try-1-") for name in runs)  # the trial's own run is listed too


def test_a_run_that_raised_says_failed_with_its_step(logdir):
    doc = TfguardPlugin(base_plugin.TBContext(logdir=logdir)).runs_answer()
    run = {r["run"]: r for r in doc["runs"]}["raised"]
    assert run["kind"] == "failed" and run["healthy"] is False
    assert run["status"]["state"] == "failed" and run["headline"] == run["status"]["text"]
    assert "GuardViolation" in run["headline"]
    assert [v["action"] for v in run["violations"]] == ["raised"]


@needs_chromium
def test_chromium_shows_the_tried_fix_and_the_failure(logdir, tmp_path):
    from tests.summary.tensorboard_server import poll, serve

    from .conftest import get

    with serve(logdir) as base:
        poll(lambda: get(base + "/data/plugins_listing", timeout=5)[0] == 200, "its plugins listing")
        done = chromium(["--virtual-time-budget=15000", "--dump-dom",
                         f"{base}/data/plugin_entry.html?name=tfguard"], tmp_path)
    dom = done.stdout
    assert '<section class="trials">' in dom, done.stderr[-2000:]
    assert "improved: fix" in dom and "unnormalized_input" in dom
    assert '<section class="run kind-failed" id="run-raised">' in dom
    assert "raised: training stopped" in dom
