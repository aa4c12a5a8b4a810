"""Reports: JSON schema, terminal summary, self-contained HTML rendered in
headless Chromium (what shows, hostile text), and the run comparison."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
from rich.console import Console

from tfguard.diagnose import (
    SCHEMA,
    Signals,
    compare_diagnoses,
    compare_logdir,
    diagnose,
    render_compare,
    render_html,
    render_terminal,
    to_json,
    write_html,
)

CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="headless Chromium not installed")

HOSTILE = [
    "<script>document.title='pwned'</script>",
    "<img src=x onerror=\"document.title='pwned'\">",
    "../../../etc/passwd",
    "line one\nline two\r\n<b>three</b>",
    "[bold red]rich markup[/] $\\frac{1}{0}$ \x1b[31mansi\x1b[0m",
    "A" * 10_000,
]


class Elements(HTMLParser):
    """Collects every element of a page with its attributes."""

    def __init__(self):
        super().__init__()
        self.items = []

    @property
    def tags(self):
        return {tag for tag, _ in self.items}

    def handle_starttag(self, tag, attrs):
        self.items.append((tag, attrs))


def chromium(args, tmp_path, timeout=90):
    profile = tmp_path / "chromium-profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           f"--user-data-dir={profile}", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    shutil.rmtree(profile, ignore_errors=True)
    return done


def hostile_diagnosis(name):
    steps = np.arange(1, 41)
    s = Signals.from_arrays({
        "train/loss": (steps[9::10], [2.3, 2.3, 2.3, 2.3]),
        "val/loss": (steps[9::10], [2.3, 2.3, 2.3, 2.3]),
        f"grad_norm/{name[:50]}": (steps, np.ones(40)),
        "grad_norm/out": (steps, np.ones(40)),
        f"activation/dead_fraction/{name[:50]}": (steps, np.full(40, 0.9)),
    }, run=name, hparams={"note": name, name[:40]: 1})
    return diagnose(s)


# -- JSON -------------------------------------------------------------------------------------
def test_json_schema_on_real_runs(offline):
    doc = to_json(offline.values())
    text = json.dumps(doc, allow_nan=False)
    assert json.loads(text)["schema"] == SCHEMA == "tfguard.report/1"
    runs = {r["run"]: r for r in doc["runs"]}
    assert set(runs) == set(offline)
    run = runs["dead_relu"]
    assert set(run) == {"run", "source", "status", "healthy", "hparams", "metrics", "symptoms", "rules_run",
                        "rules_skipped", "notes", "phases"}
    assert run["phases"] == []  # one compile: one phase, nothing to say
    symptom = run["symptoms"][0]
    assert set(symptom) == {"id", "severity", "message", "where", "evidence", "suggestion",
                            "onset_step", "onset_epoch", "cause"}
    assert all(isinstance(v, (int, float, str)) for r in doc["runs"] for s in r["symptoms"]
               for v in s["evidence"].values())
    assert all(set(s) == {"id", "reason"} for s in runs["stock_healthy_digits"]["rules_skipped"])
    assert runs["healthy_digits"]["metrics"]["val/accuracy"]["mode"] == "max"


def test_json_keeps_nonfinite_numbers_as_strings():
    d = diagnose(Signals.from_arrays({"train/loss": (None, [1.0, float("nan"), float("inf")])}))
    doc = to_json([d])
    assert doc["runs"][0]["metrics"]["train/loss"]["final"] == "Infinity"
    assert doc["runs"][0]["symptoms"][0]["evidence"]["first_value"] == "NaN"
    json.dumps(doc, allow_nan=False)


# -- terminal ------------------------------------------------------------------------------------
def test_terminal_summary_of_real_runs(offline):
    console = Console(record=True, width=140, file=io.StringIO())
    render_terminal([offline["healthy_digits"], offline["vanishing_gradient"],
                     offline["stock_healthy_digits"]], console)
    text = console.export_text()
    assert "healthy: no symptom found" in text
    assert "vanishing_gradient" in text and "hidden_0" in text
    assert "exploding_gradient: no gradient norms" in text


def test_terminal_shows_hostile_text_literally():
    out = io.StringIO()
    console = Console(record=True, width=200, file=out, force_terminal=False)
    render_terminal([hostile_diagnosis(HOSTILE[4])], console)
    text = console.export_text()
    assert "[bold red]rich markup[/]" in text  # not interpreted as markup
    assert "\\x1b[31mansi" in text and "\x1b" not in out.getvalue()  # control codes escaped
    console = Console(record=True, width=200, file=io.StringIO())
    render_terminal([], console)
    assert "no runs found" in console.export_text()


# -- HTML -----------------------------------------------------------------------------------------
def test_html_is_self_contained(offline, tmp_path):
    path = write_html(offline.values(), tmp_path / "sub" / "report.html")
    with open(path, encoding="utf-8") as f:
        page = f.read()
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|file:)""", page)
    assert "Content-Security-Policy" in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) >= 3 * len(offline)  # loss, metrics, and gradients or activations
    assert all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)


@needs_chromium
def test_html_renders_in_headless_chromium(offline, tmp_path):
    chosen = [offline[n] for n in ("healthy_digits", "dead_relu", "exploding_gradient",
                                   "overfitting", "stock_healthy_digits")]
    path = write_html(chosen, tmp_path / "report.html")
    done = chromium(["--dump-dom", f"file://{path}"], tmp_path)
    dom = done.stdout
    assert "<title>tfguard report</title>" in dom, done.stderr[-2000:]
    for d in chosen:
        assert f'<h2 class="run-name">{d.run}</h2>' in dom
    for symptom in ("dead_relu", "exploding_gradient", "overfitting"):
        assert f'data-id="{symptom}"' in dom
    assert len(re.findall(r'<img src="data:image/png;base64,', dom)) >= 12
    assert "no gradient norms" in dom  # the stock run says which rules did not run
    shot = tmp_path / "shot.png"
    done = chromium([f"--screenshot={shot}", "--window-size=1200,2400", f"file://{path}"], tmp_path)
    assert shot.exists() and shot.stat().st_size > 30_000, done.stderr[-2000:]
    from PIL import Image

    colors = Image.open(shot).convert("RGB").resize((120, 240)).getcolors(maxcolors=100_000)
    assert len(colors) > 50  # text, tables and plots, not a blank page


@needs_chromium
def test_hostile_text_shows_literally_and_runs_nothing(tmp_path):
    diagnoses = [hostile_diagnosis(name) for name in HOSTILE]
    page = render_html(diagnoses)
    path = tmp_path / "hostile.html"
    path.write_text(page, encoding="utf-8")
    done = chromium(["--dump-dom", f"file://{path}"], tmp_path)
    dom = done.stdout
    assert "<title>tfguard report</title>" in dom, done.stderr[-2000:]
    assert "pwned" not in re.search(r"<title>(.*?)</title>", dom).group(1)
    elements = Elements()
    elements.feed(dom)
    assert "script" not in elements.tags  # no element injected
    assert not [a for _, attrs in elements.items for a, _ in attrs if a.startswith("on")]
    images = [dict(attrs) for tag, attrs in elements.items if tag == "img"]
    assert images and all(set(i) == {"src", "alt"} and i["src"].startswith("data:image/png;base64,")
                          for i in images)
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    assert "&lt;img src=x onerror=\"document.title='pwned'\"&gt;" in dom
    assert "../../../etc/passwd" in dom
    assert "line one\nline two\\x0d\n" in dom  # a carriage return cannot hide text
    assert "A" * 10_000 in dom
    for name in HOSTILE:
        shown = name[:20].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        shown = shown.replace("\r", "\\x0d").replace("\x1b", "\\x1b")  # shown escaped
        assert f'<h2 class="run-name">{shown}' in dom


# -- comparison -------------------------------------------------------------------------------------
def test_compare_logdir_ranks_runs(trained):
    logdir, _, _ = trained
    rows = compare_logdir(logdir, sort_by="val/accuracy")
    assert [r.rank for r in rows] == list(range(1, len(rows) + 1))
    ranked = [r for r in rows if r.sort_value is not None]
    assert [r.sort_value for r in ranked] == sorted((r.sort_value for r in ranked), reverse=True)
    assert rows[-1].sort_value is None  # regressions have no accuracy: ranked last
    by_run = {r.run: r for r in rows}
    assert by_run["dead_relu"].worst == "error" and "dead_relu" in by_run["dead_relu"].findings
    assert by_run["oscillating_loss"].hparams == {"lr": 0.5, "momentum": 0.9}
    console = Console(record=True, width=220, file=io.StringIO())
    render_compare(rows, console, sort_by="val/accuracy")
    text = console.export_text()
    assert "best val/accuracy" in text and "healthy" in text and "label_noise" in text
    assert "healthy_cnn_rescaling" in text  # run names are not folded


def test_compare_sorts_loss_ascending():
    runs = [diagnose(Signals.from_arrays({"val/loss": (None, values)}, run=name), rules=[])
            for name, values in (("a", [1.0, 0.5]), ("b", [1.0, 0.3]), ("c", [0.9, 0.7]))]
    assert [r.run for r in compare_diagnoses(runs, sort_by="val/loss")] == ["b", "a", "c"]
    assert compare_diagnoses(runs, sort_by="val/loss")[0].to_dict()["best"]["val/loss"] == 0.3
