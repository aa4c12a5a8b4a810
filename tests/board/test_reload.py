"""TensorBoard's reload button reloads the tab: a job that wrote more shows it after a click."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from tests.summary.tensorboard_server import poll, serve
from tfguard.events._records import frame_record

from ..events.eventdata import scalar_event
from .conftest import RUNS, get
from .devtools import DevTools, needs_chromium

pytestmark = [pytest.mark.slow, needs_chromium]

TAB = "document.querySelector('iframe')?.contentDocument"
BADGE = (f"{TAB}?.getElementById('run-{RUNS['healthy']}')"
         "?.querySelector('.run-head .badge')?.textContent")


def test_the_reload_button_shows_what_a_running_job_wrote_since(board_logdir, tmp_path):
    logdir = shutil.copytree(board_logdir, tmp_path / "logs")
    folder = os.path.join(logdir, RUNS["healthy"])
    (name,) = [n for n in os.listdir(folder) if "tfevents" in n]
    with serve(logdir) as base, DevTools() as browser:
        poll(lambda: get(base + "/data/plugins_listing", timeout=5)[0] == 200, "its plugins listing")
        page = browser.open(base + "/#tfguard")
        assert browser.wait(page, BADGE) == "healthy: no symptom found"
        with open(os.path.join(folder, name), "ab") as f:  # the job logs a non-finite loss
            f.write(frame_record(scalar_event("train/loss", 10_000, float("nan")).SerializeToString()))
        time.sleep(2)
        assert browser.evaluate(page, BADGE) == "healthy: no symptom found"  # nothing asked yet
        browser.evaluate(page, "document.querySelector('.reload-button').click()")
        badge = browser.wait(page, f"{BADGE} !== 'healthy: no symptom found' && {BADGE}", timeout=30)
        assert "error" in badge
        symptoms = browser.evaluate(
            page, f"[...{TAB}.getElementById('run-{RUNS['healthy']}').querySelectorAll('.symptom')]"
                  ".map(e => e.textContent)")
        assert "nonfinite" in symptoms
