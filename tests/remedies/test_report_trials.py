"""The HTML report's "Tried fixes": rows by content, curves that decode, a page Chromium renders.

A module fixture makes real trials: `tfguard.try_fixes` on a tiny MLP fed
raw 0..256 pixels (one injected problem), with two remedies: input
normalization (a fix) and a clipnorm that clips nothing ("no better"). A
third, "worse", is the fix's trial run backwards (its before and after
swapped, judged again by `verdict`). The page is the original run's report
with the trials first.
"""

from __future__ import annotations

import base64
import dataclasses
import html as markup
import io
import json
import re

import keras
import numpy as np
import pytest
from PIL import Image
from sklearn.datasets import load_digits

from tfguard.diagnose import render_html, write_html
from tfguard.diagnose._report.plots.kit import DPI
from tfguard.diagnose._report.plots.trials import SIZE
from tfguard.remedies import Remedy, _edits, try_fixes, verdict
from tfguard.remedies._catalogue import normalization

from ..diagnose.report.test_reports import HOSTILE, Elements, chromium, needs_chromium

PNG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)">')
ROW = re.compile(r"<tr><td><a href=\"#trial-(\d+)\">.*?</tr>", re.S)
GREEN, GREY, RED = (0x1E, 0x84, 0x49), (0x7F, 0x7F, 0x7F), (0xC0, 0x39, 0x2B)


@pytest.fixture(scope="module")
def trials():
    x, y = load_digits(return_X_y=True)
    x, y = x[:480].astype("float32"), y[:480].astype("int64")

    def train():  # the mistake: raw 0..256 pixels straight into the model
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy")
        model.fit(x * 16, y, epochs=3, batch_size=32, validation_split=0.2, verbose=0)

    useless = Remedy("clipnorm_huge", "unnormalized_input", "clipnorm=1e9 (clips nothing)",
                     on_compile=lambda state, model, arguments: state.changed(
                         _edits.set_clipnorm(arguments["optimizer"], 1e9)[1]))
    result = try_fixes(train, remedies=[normalization(), useless])
    fix = result[0].to_dict()
    backwards = dict(fix, remedy="backwards", change="the normalization, undone", fix=False,
                     before=fix["after"], after=fix["before"],
                     verdict=verdict(fix["after"], fix["before"]),
                     curves={"before": fix["curves"]["after"], "after": fix["curves"]["before"]})
    return result, [*result.to_json(), backwards]


@pytest.fixture(scope="module")
def page(trials, tmp_path_factory):
    result, rows = trials
    path = tmp_path_factory.mktemp("html") / "trials.html"
    write_html(result.diagnoses, path, trials=rows)
    return path, path.read_text(encoding="utf-8")


def _rows(html):
    return {int(m.group(1)): m.group(0) for m in ROW.finditer(html)}


def _count(image, color, tolerance=40):
    pixels = np.asarray(image.convert("RGB")).astype(int)
    return int((np.abs(pixels - np.array(color)).sum(axis=2) < tolerance).sum())


def test_the_trials_are_real_and_their_verdicts_differ(trials):
    result, rows = trials
    assert [t["verdict"] for t in rows] == ["improved", "no better", "worse"]
    assert "unnormalized_input" in result.diagnoses[0].ids


def test_trials_write_their_page(trials, tmp_path):
    result, _ = trials
    page = tmp_path / "r.html"  # the original run's sections are the page fixture's and the CLI's
    assert dataclasses.replace(result, diagnoses=[]).write_html(page) == str(page)
    text = page.read_text(encoding="utf-8")
    assert "<title>tfguard try-fixes</title>" in text and sorted(_rows(text)) == [1, 2]


def test_one_row_per_trial_with_its_change_numbers_and_verdict(trials, page):
    _, html = page
    assert "<h2>Tried fixes</h2>" in html
    assert html.index('<section class="trials"') < html.index('<section class="run"')
    rows = _rows(html)
    assert sorted(rows) == [1, 2, 3]
    for i, t in enumerate(trials[1], 1):
        row = rows[i]
        assert markup.escape(t["change"]) in row and t["finding"] in row and t["measure"] in row
        assert f"{t['before']:.4g} → {t['after']:.4g}" in row
        assert f'<span class="verdict {t["verdict"].replace(" ", "-")}">{t["verdict"]}</span>' in row
    assert '<span class="fix">fix</span>' in rows[1] and "not a fix" not in rows[1]
    for i in (2, 3):  # "no better" and "worse" are never shown as fixes
        assert "not a fix" in rows[i] and 'class="fix"' not in rows[i]
    assert "Normalization() adapted on the training data" in rows[1]
    assert "Adam(clipnorm=" in rows[2] or "SGD(clipnorm=1000000000.0)" in rows[2]
    assert "(−" in rows[1] and "(+" in rows[3]  # the relative change, signed
    assert "1 of 3 trial(s) improved the measure by more than 5%" in html


def test_a_verdict_word_decides_never_a_claimed_fix(trials):
    lying = dict(trials[1][1], fix=True)  # "no better", claiming to be a fix
    html = render_html([], trials=[lying])
    [row] = _rows(html).values()
    assert "not a fix" in row and 'class="fix"' not in row
    assert "0 of 1 trial(s) improved" in html and "No runs found" not in html


def test_each_trial_draws_both_curves_at_one_size(trials, page):
    _, html = page
    images = {markup.unescape(alt): base64.b64decode(data) for data, alt in PNG.findall(html)}
    shots = [images[f"trial {i}: the original's and the trial's val_loss by epoch"] for i in (1, 2, 3)]
    expected = (round(SIZE[0] * DPI), round(SIZE[1] * DPI))
    for png in shots:
        image = Image.open(io.BytesIO(png))
        assert image.size == expected
        assert np.asarray(image.convert("L")).std() > 10  # drawn, not blank
        assert _count(image, GREY) > 100  # the original's curve, in every panel
    assert _count(Image.open(io.BytesIO(shots[0])), GREEN) > 100  # the fix, in green
    assert _count(Image.open(io.BytesIO(shots[1])), GREEN) < 20
    assert _count(Image.open(io.BytesIO(shots[2])), RED) > 100  # the worse one, in red
    # the original run's own plots are still there, below
    assert any(alt.startswith("loss curves of run") for alt in images)


def test_the_json_report_gives_the_same_section(trials):
    result, _ = trials
    doc = json.loads(json.dumps(result.to_json(), allow_nan=False))  # "NaN" spelled as JSON does
    from_json = render_html([], trials=doc)
    from_objects = render_html([], trials=list(result))
    strip = re.compile(r"<section class=\"trials\".*?</section>", re.S)
    assert strip.search(from_json).group(0) == strip.search(from_objects).group(0)


def test_hostile_text_in_a_trial_is_shown_literally(trials):
    hostile = [dict(trials[1][0], change=text, finding=text[:80], notes=[text])
               for text in HOSTILE]
    html = render_html([], trials=hostile)
    parser = Elements()
    parser.feed(html)
    assert "script" not in parser.tags
    assert not [name for _, attrs in parser.items for name, _ in attrs if name.startswith("on")]
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in html
    assert len(PNG.findall(html)) == len(HOSTILE)  # the panels' titles are bounded labels


def test_run_try_fixes_html_writes_the_section(tmp_path):
    from tfguard._cli import main

    from .test_cli_try_fixes import SCRIPT

    script, html = tmp_path / "train.py", tmp_path / "report.html"
    script.write_text(SCRIPT)
    status = main(["run", "--try-fixes", "--max-trials", "1", "--quiet", "--logdir",
                   str(tmp_path / "runs"), "--html", str(html), str(script)])
    assert status == 0
    page = html.read_text(encoding="utf-8")
    doc = json.loads((tmp_path / "runs" / "report.json").read_text())
    [row] = _rows(page).values()
    [trial] = doc["trials"]
    assert "<title>tfguard run train.py</title>" in page and "Tried fixes" in page
    assert f"{trial['before']:.4g} → {trial['after']:.4g}" in row and ">improved<" in row
    assert len(PNG.findall(page)) > 3  # the trial's panel and the original's plots


@needs_chromium
def test_chromium_renders_the_trials_and_their_curves(page, tmp_path):
    path, html = page
    done = chromium(["--dump-dom", f"file://{path}"], tmp_path)
    dom = done.stdout
    assert "<h2>Tried fixes</h2>" in dom, done.stderr[-2000:]
    assert dom.count('<img src="data:image/png;base64,') == len(PNG.findall(html))
    assert "<script" not in dom
    shot = tmp_path / "shot.png"
    done = chromium([f"--screenshot={shot}", "--window-size=1200,1400", f"file://{path}"], tmp_path)
    assert shot.exists(), done.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 1400)
    # the top of the page is the trials' table and their small multiples, side by side
    assert _count(image, GREEN) > 150  # the fix's verdict and its curve
    assert _count(image, GREY) > 150  # the original's curves
    band = np.asarray(image)[300:1400]
    assert (np.abs(np.diff(band.astype(int), axis=1)).sum(axis=2) > 60).mean() > 0.005
