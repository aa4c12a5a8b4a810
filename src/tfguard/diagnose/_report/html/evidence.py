"""`evidence_section` and `distributions_section`: each finding's evidence, and its layers' distributions.

`evidence_section` gives every finding of a run its own block: the symptom,
where, the message and the figure of its evidence (`tfguard.diagnose._report.plots.evidence`).
`distributions_section` draws, for each layer a finding names, the
distributions of its weights, gradients and activations over steps
(`tfguard.diagnose._report.plots.distributions`), and so for the first non-finite layer the
firewall's replay localized; a run whose findings name no layer with
histograms gets its first layers' distributions instead, so a healthy run
still shows them (layers with weights first).

Example:

>>> from tfguard.diagnose import Finding, Signals, diagnose
>>> s = Signals.from_arrays({"activation/dead_fraction/d": ([1, 2, 3, 4], [0.9, 0.9, 0.9, 0.9])})
>>> d = diagnose(s, rules=[])
>>> d.findings.append(Finding("dead_relu", "warning", "dead", where="d", onset_step=1))
>>> html = evidence_section(d)
>>> 'data-id="dead_relu"' in html and "data:image/png;base64," in html
True
>>> distributions_section(d)
''
"""

from __future__ import annotations

from tfguard import _tags
from tfguard.diagnose._causes import INVARIANTS
from tfguard.diagnose._engine import Diagnosis
from tfguard.diagnose._inputs.violations import violations
from tfguard.diagnose._report.html.parts import e, img
from tfguard.diagnose._report.plots.distributions import distributions_png, layer_histograms
from tfguard.diagnose._report.plots.evidence import evidence_png, on_loss_curve

MAX_LAYERS = 6
"""The most layers whose distributions one run shows."""
OVERVIEW_LAYERS = 2
"""Layers shown when no finding names one (the first ones, in model order)."""


def evidence_section(d: Diagnosis) -> str:
    """One block per finding: symptom, where, onset, message and its evidence figure (`""` for none)."""
    if not d.findings:
        return ""
    blocks = []
    for f in d.findings:
        where = f" in '{f.where}'" if f.where else ""
        figure = img(evidence_png(d.signals, f), f"evidence of {f.id}{where} in run {d.run}",
                     f"Evidence of {f.id}{where} ({f.onset_text()}).", "evidence")
        if not figure and on_loss_curve(f) and d.signals is not None:
            figure = ('<p class="muted">Its evidence is the loss curve above, where its onset '
                      f"({e(f.onset_text())}) is marked.</p>")
        elif not figure and f.id in INVARIANTS:
            figure = ('<p class="muted">An invariant of a correct program, checked once on the '
                      "model's own functions: its evidence is the numbers and names of the "
                      "finding.</p>")
        elif not figure:
            figure = '<p class="muted">No curve shows this finding (a static check of the model or pipeline, or its signals were not logged).</p>'
        blocks.append(
            f'<div class="finding" data-id="{e(f.id)}"><h4><span class="sev {e(f.severity)}">'
            f"{e(f.severity)}</span> <span class=\"sym\">{e(f.id)}</span>"
            f"{' in <code>' + e(f.where) + '</code>' if f.where else ''}</h4>"
            f"<p>{e(f.message)}</p>{figure}</div>")
    return "<h3>Evidence</h3>\n" + "\n".join(blocks)


def _layers_with_histograms(d: Diagnosis) -> tuple[list[str], bool]:
    s = d.signals
    named = [f.where for f in d.findings if f.where]
    named += [v.first_bad_layer for v in violations(s) if v.first_bad_layer]  # the replay's layer
    named = list(dict.fromkeys(named))
    chosen = [n for n in named if layer_histograms(s.histograms, n)]
    if chosen:
        return chosen[:MAX_LAYERS], True
    candidates = s.layer_order() or sorted({t.rsplit("/", 2)[-2] for t in s.histograms
                                            if t.startswith(_tags.HIST) and t.count("/") >= 3})
    weighted = [n for n in candidates  # layers with weights first (a pooling layer has none)
                if any(t.startswith(_tags.HIST + "weights/") for t in layer_histograms(s.histograms, n))]
    rest = [n for n in candidates if n not in weighted and layer_histograms(s.histograms, n)]
    return (weighted + rest)[:OVERVIEW_LAYERS], False


def distributions_section(d: Diagnosis) -> str:
    """Small multiples of the named layers' distributions over steps (`""` without histograms)."""
    if d.signals is None or not d.signals.histograms:
        return ""
    layers, named = _layers_with_histograms(d)
    figures = [img(distributions_png(d.signals, layer), f"distributions of {layer} in run {d.run}",
                   f"Layer '{layer}': weights, gradients and activations over steps; bands hold "
                   "the middle 100, 87, 68 and 38 % of the values, the line is the median.",
                   "distributions")
               for layer in layers]
    figures = [f for f in figures if f]
    if not figures:
        return ""
    why = ("the layers the findings (and the firewall's replays) name" if named else
           "no finding names a layer with histograms: the first layers")
    return "\n".join(["<h3>Distributions</h3>", f'<p class="muted">{e(why)}.</p>', *figures])
