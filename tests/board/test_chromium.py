"""The tfguard tab in headless Chromium: the buggy run's root cause, the healthy run, hostile text."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from .conftest import HOSTILE_HPARAM, HOSTILE_RUN, RUNS
from .devtools import Elements, chromium, needs_chromium

pytestmark = [pytest.mark.slow, needs_chromium]

BUDGET = "--virtual-time-budget=15000"


@pytest.fixture(scope="module")
def dom(tensorboard, tmp_path_factory):
    """The tab's DOM once its module has fetched and drawn the runs (the iframe's page itself)."""
    tmp = tmp_path_factory.mktemp("chromium")
    done = chromium([BUDGET, "--dump-dom", f"{tensorboard}/data/plugin_entry.html?name=tfguard"], tmp)
    assert '<main class="tfguard">' in done.stdout, done.stderr[-2000:]
    return done.stdout


def _section(dom: str, run: str) -> str:
    from urllib.parse import quote

    start = dom.index('<section class="run kind-')
    start = dom.index(f'id="run-{quote(run, safe="")}"', start)
    end = dom.find("<section", start)
    return dom[start:end if end > 0 else len(dom)]


def test_the_buggy_run_shows_its_root_cause_first_with_layer_onset_and_fix(dom):
    section = _section(dom, RUNS["buggy"])
    first = section.index('<li class="finding')
    assert section.index('<span class="symptom">dead_relu</span><span class="root-cause">root cause</span>',
                         first) < section.index("</li>", first)
    head = section[first:section.index("</li>", first)]
    assert "layer: hidden_1" in head and "onset: epoch 0, step" in head and 'class="fix">fix: ' in head
    assert "caused by dead_relu (hidden_1)" in section


def test_the_healthy_run_says_healthy(dom):
    section = _section(dom, RUNS["healthy"])
    assert '<span class="badge kind-healthy">healthy: no symptom found</span>' in section
    assert '<li class="finding' not in section


def test_violations_are_drawn_on_a_timeline_with_their_quarantine(dom):
    section = _section(dom, RUNS["guarded"])
    assert section.count('<circle') == 4 and section.count('class="band"') == 4
    assert section.count('<polyline') == 1 and "skipped: update not applied" in section
    assert 'class="live"' not in section  # its Logger wrote how it ended: not "being written"
    assert "/quarantine/" in section and "First non-finite layer on replay" in section


def test_html_and_script_in_a_run_name_or_hparam_are_shown_as_text(dom):
    parser = Elements()
    parser.feed(dom)
    assert "img" not in parser.tags  # the run name's <img onerror> was not made an element
    assert [tag for tag, _ in parser.items].count("script") == 1  # TensorBoard's own loader only
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    assert HOSTILE_HPARAM not in dom and HOSTILE_RUN not in dom
    assert "&lt;img src=x onerror=\"document.title='pwned'\"&gt;" in dom


def test_a_screenshot_of_tensorboard_shows_the_tab(tensorboard, tmp_path):
    shot = tmp_path / "tab.png"
    done = chromium([BUDGET, "--window-size=1280,1000", f"--screenshot={shot}",
                     f"{tensorboard}/#tfguard"], tmp_path)
    assert shot.exists() and shot.stat().st_size > 10_000, done.stderr[-2000:]
    image = np.asarray(Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")).astype(int)
    assert image.shape == (1000, 1280, 3)
    body = image[100:]  # below TensorBoard's orange header: the tab's page, drawn, not blank
    assert (np.abs(np.diff(body, axis=1)).sum(axis=2) > 60).mean() > 0.005
    red = (body[..., 0] > 150) & (body[..., 1] < 80) & (body[..., 2] < 80)
    assert red.sum() > 200  # the buggy run's red border and error badges are on screen
