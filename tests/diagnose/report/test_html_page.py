"""The HTML report on real runs: firewall, evidence, distributions, the sweep comparison,
hyperparameters as given, the learning rate on its own axis; plots that decode and render.

A module fixture trains four tiny Keras models with `tfguard.Logger` (and
`tfguard.guard` for the first) into one log directory, a sweep of
`batch_size` and `lr`: one with NaN rows in its data (the firewall skips and
quarantines those batches), one whose ReLU layer is dead from the start, one
fed unnormalized inputs and one that overfits random labels. Each test
renders the page from those event files and checks its sections by content.
"""

from __future__ import annotations

import base64
import io
import os
import re
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from tfguard.diagnose import Finding, Signals, diagnose, diagnose_logdir, render_html  # noqa: E402
from tfguard.diagnose._causes import INVARIANTS  # noqa: E402
from tfguard.diagnose._report.plots.curves import learning_rate_png, metrics_png  # noqa: E402
from tfguard.diagnose._report.plots.distributions import percentiles  # noqa: E402
from tfguard.diagnose._report.plots.evidence import evidence_png, on_loss_curve  # noqa: E402

from .test_reports import Elements, chromium, needs_chromium  # noqa: E402

PNG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)">')


def _model(keras, hidden_bias=0.0, units=16, inputs=8, classes=2):
    model = keras.Sequential([
        keras.Input((inputs,)),
        keras.layers.Dense(units, activation="relu", name="hidden",
                           bias_initializer=keras.initializers.Constant(hidden_bias)),
        keras.layers.Dense(classes, activation="softmax", name="out"),
    ])
    return model


def _fit(model, keras, x, y, logdir, hparams, epochs, validation=None, guarded=None):
    from tfguard import Logger, guard

    model.compile(keras.optimizers.Adam(hparams["lr"]), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    if guarded is not None:
        model = guard(model, policy="skip", quarantine_dir=guarded)
    logger = Logger(logdir, hparams=hparams, run_subdir=False, scalars_every=1, histograms_every=2)
    model.fit(x, y, batch_size=hparams["batch_size"], epochs=epochs, verbose=0, shuffle=False,
              validation_data=validation, callbacks=[logger])


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """`(logdir, quarantine dir)`: four real runs of a batch_size / lr sweep."""
    import keras

    keras.utils.set_random_seed(0)
    root = tmp_path_factory.mktemp("report_html")
    logdir, quarantine = root / "logs", str(root / "quarantine")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(320, 8)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int64")
    val = (x[256:], y[256:])
    poisoned = x[:256].copy()
    poisoned[[40, 41, 170]] = np.nan  # batches 1 and 5 of every epoch (32 rows a batch)
    _fit(_model(keras), keras, poisoned, y[:256], str(logdir / "guarded"),
         {"batch_size": 32, "lr": 1e-2, "units": 16}, epochs=3, validation=val, guarded=quarantine)
    _fit(_model(keras, hidden_bias=-20.0), keras, x[:256], y[:256], str(logdir / "dead"),
         {"batch_size": 64, "lr": 1e-3, "units": 16}, epochs=5, validation=val)
    _fit(_model(keras), keras, x[:256] * 500 + 2000, y[:256], str(logdir / "unnormalized"),
         {"batch_size": 64, "lr": 1e-3, "units": 16}, epochs=4, validation=(val[0] * 500 + 2000, val[1]))
    noise = rng.normal(size=(48, 30)).astype("float32")
    labels = rng.integers(0, 2, size=48)
    _fit(_model(keras, units=256, inputs=30), keras, noise[:32], labels[:32], str(logdir / "overfit"),
         {"batch_size": 32, "lr": 1e-2, "units": 256}, epochs=8, validation=(noise[32:], labels[32:]))
    return str(logdir), quarantine


@pytest.fixture(scope="module")
def page(sweep):
    """`(diagnoses by run, the rendered page)`."""
    diagnoses = diagnose_logdir(sweep[0])
    return {d.run: d for d in diagnoses}, render_html(diagnoses)


def _section(page_html: str, run: str) -> str:
    start = page_html.index(f'<h2 class="run-name">{run}</h2>')
    end = page_html.find('<section class="run"', start)
    return page_html[start:end if end > 0 else len(page_html)]


def _block(html: str, css: str) -> str:
    start = html.index(f'<div class="{css}"')
    return html[start:html.index("</div>", start)]


def _png(data: str) -> Image.Image:
    raw = base64.b64decode(data)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    return Image.open(io.BytesIO(raw)).convert("RGB")


def _non_blank(image: Image.Image) -> bool:
    pixels = np.asarray(image, dtype=np.float64)
    return pixels.std() > 10 and len(image.getcolors(maxcolors=1_000_000) or []) > 20


# -- the runs are what the report needs ---------------------------------------------------------
def test_the_sweep_has_the_findings_the_report_draws(page):
    diagnoses, _ = page
    assert set(diagnoses) == {"guarded", "dead", "unnormalized", "overfit"}
    assert diagnoses["guarded"].signals.guard_events
    assert [f.where for f in diagnoses["dead"].by_id("dead_relu")] == ["hidden"]
    assert diagnoses["unnormalized"].by_id("unnormalized_input")
    assert diagnoses["overfit"].by_id("overfitting")


# -- firewall -------------------------------------------------------------------------------------
def test_firewall_section_lists_each_violation_with_what_was_done(page, sweep):
    diagnoses, html = page
    records = diagnoses["guarded"].signals.guard_events
    firewall = _block(_section(html, "guarded"), "firewall")
    rows = re.findall(r"<tr><td>(\d+)</td><td>(batch \d+ \(epoch \d+, batch \d+ of it\))</td>", firewall)
    assert len(rows) == len(records) >= 6  # 2 bad batches an epoch, 3 epochs
    assert [int(step) for step, _ in rows] == [r["step"] for r in records]
    assert {r["epoch"] for r in records} == {0, 1, 2}
    assert all(f"batch {r['batch']} (epoch {r['epoch']}," in firewall for r in records)
    assert "batch 1 of it" in firewall and "batch 5 of it" in firewall
    assert firewall.count("skipped: update not applied") == len(records)
    assert "data · finite" in firewall and '<span class="where">x</span>' in firewall
    assert "NaN, 0 +Inf, 0 -Inf of" in firewall
    saved = re.findall(r"<code>([^<]+)</code>", firewall)
    assert saved and all(path.startswith(sweep[1]) and os.path.isdir(path) for path in saved)
    assert "First non-finite layer on replay: &#x27;hidden&#x27;" in firewall
    (timeline,) = PNG.findall(firewall)
    assert "firewall timeline" in timeline[1] and _non_blank(_png(timeline[0]))
    assert 'class="firewall"' not in _section(html, "dead")  # no violation, no section


def test_firewall_replay_layer_gets_its_distributions(page):
    _, html = page
    guarded = _section(html, "guarded")
    assert "distributions of hidden in run guarded" in guarded
    assert "the firewall&#x27;s replays" in guarded


# -- evidence of each finding ------------------------------------------------------------------------
def test_each_finding_gets_its_evidence_figure(page):
    diagnoses, html = page
    for run, d in diagnoses.items():
        section = _section(html, run)
        for f in d.findings:
            block = section[section.index(f'<div class="finding" data-id="{f.id}"'):]
            block = block[:block.index("</div>")]
            if on_loss_curve(f):  # no_learning, nonfinite, ...: the loss curve with its onset
                assert "Its evidence is the loss curve above" in block and not PNG.findall(block)
            elif f.id in INVARIANTS:  # a collapsed output, ...: numbers, not a curve
                assert "An invariant of a correct program" in block and not PNG.findall(block)
            else:
                (figure,) = PNG.findall(block)
                assert f"evidence of {f.id}" in figure[1] and _non_blank(_png(figure[0]))


def test_evidence_is_drawn_where_it_lives(page):
    _, html = page
    dead = _section(html, "dead")
    assert "evidence of dead_relu in &#x27;hidden&#x27; in run dead" in dead
    assert "distributions of hidden in run dead" in dead  # the layer the finding names
    assert "the layers the findings" in dead
    unnormalized = _section(html, "unnormalized")
    assert "evidence of unnormalized_input in run unnormalized" in unnormalized
    overfit = _section(html, "overfit")
    assert "evidence of overfitting in run overfit" in overfit


def test_evidence_figures_on_signals_of_each_kind():
    steps = np.arange(1, 41)
    s = Signals.from_arrays({
        "train/loss": (steps[9::10], [1.0, 0.5, 0.4, 0.3]),
        "val/loss": (steps[9::10], [1.0, 0.6, 0.9, 1.2]),
        "grad_norm/a": (steps, np.geomspace(1e-2, 1e3, 40)), "grad_norm/b": (steps, np.ones(40)),
        "data/input_mean": (steps, np.full(40, 120.0)), "data/input_std": (steps, np.full(40, 60.0)),
        "data/input_min": (steps, np.zeros(40)), "data/input_max": (steps, np.full(40, 255.0)),
        "data/label_min": (steps, np.zeros(40)), "data/label_max": (steps, np.full(40, 10.0)),
        "optimizer/learning_rate": (steps, np.full(40, 0.5)),
        "activation/saturated_fraction/a": (steps, np.linspace(0, 1, 40)),
    })
    cases = [Finding("exploding_gradient", "error", "", where="a", onset_step=20),
             Finding("unnormalized_input", "warning", "", onset_step=1),
             Finding("overfitting", "warning", "", onset_epoch=2, evidence={"best_epoch": 1}),
             Finding("label_range", "error", "", onset_step=1,
                     evidence={"accepted_min": 0, "accepted_max": 9}),
             Finding("learning_rate", "error", "", onset_step=5),
             Finding("saturated_activation", "warning", "", where="a", onset_step=30)]
    for f in cases:
        image = _png(base64.b64encode(evidence_png(s, f)).decode())
        assert _non_blank(image) and 400 < image.width < 1000, f.id
    assert evidence_png(s, Finding("pipeline_order", "warning", "")) is None
    assert evidence_png(s, Finding("oscillating_loss", "warning", "", onset_step=20)) is None


# -- distributions ---------------------------------------------------------------------------------
def test_percentiles_of_a_histogram_match_the_samples():
    samples = np.random.default_rng(0).normal(size=100_000)
    counts, edges = np.histogram(samples, bins=60)
    buckets = np.stack([edges[:-1], edges[1:], counts], axis=1)
    bps = (0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000)
    got = percentiles(buckets, bps)
    want = np.percentile(samples, [b / 100 for b in bps])
    assert np.allclose(got, want, atol=0.05)
    assert np.all(np.diff(got) >= 0)
    assert np.isnan(percentiles(np.zeros((0, 3)))).all()


def test_distributions_are_small_multiples_of_weights_gradients_activations(page):
    diagnoses, html = page
    d = diagnoses["dead"]
    tags_drawn = [t for t in d.signals.histograms if "hidden" in t]
    assert any(t.startswith("hist/weights/") for t in tags_drawn)
    assert any(t.startswith("hist/gradients/") for t in tags_drawn)
    section = _section(html, "dead")
    (figure,) = [f for f in PNG.findall(section) if f[1] == "distributions of hidden in run dead"]
    image = _png(figure[0])
    assert _non_blank(image)
    assert image.width > 700  # a row of panels, not one plot
    # TensorBoard's orange bands are there
    orange = np.asarray(image)[..., 0].astype(int) - np.asarray(image)[..., 2].astype(int) > 80
    assert orange.mean() > 0.02
    overfit = _section(html, "overfit")  # no finding names a layer: the first layers with weights
    assert "no finding names a layer with histograms: the first layers" in overfit
    assert [alt for _, alt in PNG.findall(overfit) if alt.startswith("distributions")] == [
        "distributions of hidden in run overfit", "distributions of out in run overfit"]


# -- the sweep -----------------------------------------------------------------------------------------
def test_a_sweep_gets_one_comparison_row_per_run_and_overlaid_curves(page):
    diagnoses, html = page
    start = html.index('<section class="compare" id="compare">')
    compare = html[start:html.index("</section>", start)]
    assert "Comparison of 4 runs" in compare
    rows = re.findall(r'<tr><td>(\d)</td><td><span class="swatch"[^>]*></span><a href="#run-(\d)">([^<]+)</a>',
                      compare)
    assert sorted(r[2] for r in rows) == sorted(diagnoses)
    assert [int(r[0]) for r in rows] == [1, 2, 3, 4]
    for _rank, index, run in rows:  # each link leads to that run's section
        assert f'<section class="run" id="run-{index}">\n<h2 class="run-name">{run}</h2>' in html
    head = compare[compare.index("<tr>"):compare.index("</tr>")]
    assert "batch_size" in head and "lr" in head and "findings" in head and "best val/accuracy" in head
    assert "dead_relu" in compare and "overfitting" in compare and "unnormalized_input" in compare
    cells = re.findall(r"<td>([^<]*)</td>", compare)
    assert "64" in cells and "32" in cells and "0.01" in cells and "0.001" in cells
    (overlay,) = PNG.findall(compare)
    image = _png(overlay[0])
    assert _non_blank(image) and image.height > 400  # loss and accuracy panels


def test_integers_stay_integers(page):
    diagnoses, html = page
    assert diagnoses["dead"].hparams["batch_size"] == 64.0  # the hparams plugin stores doubles
    hparams = _section(html, "dead")
    table = hparams[hparams.index('class="wide hparams"'):]
    table = table[:table.index("</table>")]
    assert "<td>batch_size</td><td>64</td>" in table and "<td>units</td><td>16</td>" in table
    assert "<td>lr</td><td>0.001</td>" in table
    assert not re.search(r"<td>\d+\.0</td>", table)
    assert "<td>learning_rate</td><td>0.001</td>" in table  # float32 noise removed


def test_learning_rate_gets_its_own_log_panel(page):
    steps = np.arange(1, 6)
    s = Signals.from_arrays({"train/accuracy": (steps, [0.5, 0.6, 0.7, 0.8, 0.9]),
                             "train/learning_rate": (steps, [1e-3] * 5)})
    assert s.metric_names() == ["accuracy", "learning_rate"]
    no_rate = Signals.from_arrays({"train/learning_rate": (steps, [1e-3] * 5),
                                   "train/loss": (steps, [1.0] * 5)})
    assert metrics_png(no_rate) is None  # a learning rate is never drawn as a metric
    assert learning_rate_png(s) is not None
    _, html = page
    for run in ("guarded", "dead"):
        (panel,) = [f for f in PNG.findall(_section(html, run)) if f[1] == f"learning rate of run {run}"]
        assert _non_blank(_png(panel[0]))


# -- one self-contained file -------------------------------------------------------------------------
def test_every_embedded_plot_decodes_to_a_non_blank_png_of_the_expected_size(page):
    _, html = page
    images = PNG.findall(html)
    assert len(images) >= 25
    for data, alt in images:
        image = _png(data)
        assert 250 < image.width < 1100 and 120 < image.height < 2000, (alt, image.size)
        assert _non_blank(image), alt
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|file:)""", html)


def test_hostile_names_in_firewall_and_hparams_are_literal():
    hostile = "<script>alert(1)</script>\r\x1b[31m" + "W" * 3000
    record = {"step": 2, "batch": 2, "epoch": 0, "stage": "gradients", "where": hostile,
              "check": "finite", "counts": {"nan": 3.0, "posinf": 0.0, "neginf": 0.0},
              "failed": [f"gradients: {hostile}"], "action": "skipped"}
    line = (f"- step 2, **gradients**: {hostile} (skipped). gradient at batch 2 (epoch 0, batch 2 of "
            f"the epoch) failed. The batch is saved in /q/<img src=x onerror=alert(1)>. "
            f"First non-finite layer on replay: '{hostile}' (output 0).")
    s = Signals.from_arrays({"batch/loss": (np.arange(1, 6), [1.0, 0.9, 0.8, 0.7, 0.6]),
                             "train/loss": ([5], [0.6])},
                            run=hostile, hparams={hostile: hostile, "n": 64.0},
                            texts={"guard/events": [(2, line)]}, guard_events=[record])
    page = render_html([diagnose(s), diagnose(Signals.from_arrays({"train/loss": ([5], [1.0])},
                                                                   run="other"))])
    elements = Elements()
    elements.feed(page)
    assert "script" not in elements.tags
    assert not [a for _, attrs in elements.items for a, _ in attrs if a.startswith("on")]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x0d\\x1b[31m" + "W" * 3000 in page
    assert "/q/&lt;img src=x onerror=alert(1)&gt;" in page
    assert 'class="firewall"' in page and 'class="compare"' in page


def test_report_command_writes_the_sections(sweep, tmp_path):
    from tfguard._cli import main

    logdir = tmp_path / "logs"  # two of the runs: a sweep with a firewall and a finding
    logdir.mkdir()
    for run in ("guarded", "dead"):
        shutil.copytree(os.path.join(sweep[0], run), logdir / run)
    out = tmp_path / "report.html"
    assert main(["report", str(logdir), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    for marker in ('<section class="compare"', '<div class="firewall">', "<h3>Evidence</h3>",
                   "<h3>Distributions</h3>", "learning rate of run"):
        assert marker in html


@needs_chromium
def test_chromium_renders_the_plots(page, tmp_path):
    _, html = page
    path = tmp_path / "report.html"
    path.write_text(html, encoding="utf-8")
    done = chromium(["--dump-dom", f"file://{path}"], tmp_path)
    dom = done.stdout
    assert "<title>tfguard report</title>" in dom, done.stderr[-2000:]
    assert dom.count('<img src="data:image/png;base64,') == len(PNG.findall(html))
    for marker in ("Comparison of 4 runs", "<h3>Firewall</h3>", "<h3>Evidence</h3>",
                   "<h3>Distributions</h3>"):
        assert marker in dom
    shot = tmp_path / "shot.png"
    done = chromium([f"--screenshot={shot}", "--window-size=1200,3000", f"file://{path}"], tmp_path)
    assert shot.exists(), done.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 3000)
    # the top 3000 px hold the index, the comparison table and its overlaid curves: drawn, not blank
    assert _non_blank(image)
    band = np.asarray(image)[1000:3000]
    assert (np.abs(np.diff(band.astype(int), axis=1)).sum(axis=2) > 60).mean() > 0.005  # lines drawn
