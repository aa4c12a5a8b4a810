"""`compare_section`: the HTML comparison of a log directory with several runs (a sweep).

One row per run, ranked as `tfguard compare` ranks them
(`compare_diagnoses`): a colour swatch (the run's colour in the overlaid
curves), the run (a link to its section), the hyperparameters that differ
between runs as columns (the shared ones listed once above the table), the
best value of the ranking metric, the final losses and accuracy, and the
findings coloured by severity. Below it, `overlay_png` draws every run's
loss and metric curves on one axis each, so the person sees which settings
led to which problems.

Example:

>>> from tfguard.diagnose import Signals, diagnose
>>> runs = [diagnose(Signals.from_arrays({"train/loss": (None, [1.0, 0.4 + lr]),
...                                       "val/loss": (None, [1.1, 0.5 + lr])},
...                                      run=f"lr_{lr}", hparams={"lr": lr, "batch_size": 64.0}))
...         for lr in (0.1, 0.3)]
>>> html = compare_section(runs)
>>> 'class="compare' in html, "batch_size = 64" in html, "64.0" in html
(True, True, False)
>>> compare_section(runs[:1])
''
"""

from __future__ import annotations

from tfguard import _tags
from tfguard._findings import fmt
from tfguard.diagnose._engine import Diagnosis
from tfguard.diagnose._report.compare.overlay import overlay_png
from tfguard.diagnose._report.compare.rank import FINAL_METRICS, compare_diagnoses
from tfguard.diagnose._report.html.parts import e, hparam_text, img, logged_table, table
from tfguard.diagnose._report.plots.kit import run_color

MAX_HPARAM_COLUMNS = 8
"""The most hyperparameters shown as columns (those that differ between runs first)."""


def sort_metric(diagnoses: list[Diagnosis]) -> str:
    """The metric the comparison ranks by: `val/accuracy`, else `val/loss`, else `train/loss`.

    Example:

    >>> sort_metric([])
    'train/loss'
    """
    for tag in (_tags.val("accuracy"), _tags.val("loss"), _tags.train("accuracy")):
        if any(tag in d.metrics for d in diagnoses):
            return tag
    return _tags.train("loss")


def _hparam_texts(d: Diagnosis) -> dict[str, str]:
    logged = logged_table(d.signals)
    return {str(k): hparam_text(v, logged.get(str(k))) for k, v in d.hparams.items()}


def compare_section(diagnoses: list[Diagnosis], anchors: dict[str, int] | None = None) -> str:
    """The comparison of several runs, or `""` for fewer than two.

    Args:
        diagnoses: the runs' diagnoses.
        anchors: run name -> index of its section (`#run-<index>`), for the
            runs the page shows in detail; the others get a row, no link,
            and no curve in the overlay. Defaults to `None` (every run, by
            its position in `diagnoses`).

    Returns:
        HTML: heading, shared hyperparameters, the ranked table and the overlaid curves.
    """
    diagnoses = list(diagnoses)
    if len(diagnoses) < 2:
        return ""
    anchors = anchors or {d.run: i for i, d in enumerate(diagnoses)}
    by_run = {d.run: d for d in diagnoses}
    metric = sort_metric(diagnoses)
    rows = compare_diagnoses(diagnoses, sort_by=metric)
    texts = {r.run: _hparam_texts(by_run[r.run]) for r in rows}
    keys = list(dict.fromkeys(k for r in rows for k in texts[r.run]))
    varying = [k for k in keys if len({texts[r.run].get(k) for r in rows}) > 1]
    shared = [k for k in keys if k not in varying]
    shown = varying[:MAX_HPARAM_COLUMNS]
    finals = [t for t in FINAL_METRICS if any(t in r.final for r in rows)]
    head = ["#", "run", *shown, f"best {metric}", *[f"final {t}" for t in finals], "findings"]
    body = []
    for i, r in enumerate(rows):
        if r.run in anchors:
            swatch = f'<span class="swatch" style="background:{run_color(i)}"></span>'
            link = f'<a href="#run-{anchors[r.run]}">{e(r.run)}</a>'
        else:  # past the page's cap of detailed runs: a row only
            swatch, link = '<span class="swatch"></span>', e(r.run)
        cells = [e(r.rank), swatch + link]
        cells += [e(texts[r.run].get(k, "-")) for k in shown]
        cells.append(e(fmt(r.sort_value)) if r.sort_value is not None else "-")
        cells += [e(fmt(r.final[t])) if t in r.final and r.final[t] is not None else "-" for t in finals]
        state = r.worst or ("healthy" if r.state == "completed" else "error")
        cells.append(f'<span class="{e(state)}">{e(r.summary())}</span>')
        body.append(cells)
    common = ", ".join(f"{k} = {texts[rows[0].run].get(k)}" for k in shared
                       if k in texts[rows[0].run])
    parts = ['<section class="compare" id="compare">', f"<h2>Comparison of {len(rows)} runs</h2>",
             f"<p>Ranked by the best {e(metric)}; runs without it come last.</p>"]
    if common:
        parts.append(f'<p class="muted">Same in every run: {e(common)}</p>')
    if len(varying) > len(shown):
        parts.append(f'<p class="muted">{len(varying) - len(shown)} more differing '
                     "hyperparameter(s) are in each run's own section.</p>")
    parts.append(table(head, body, "comparison"))
    if len(anchors) < len(rows):
        parts.append(f'<p class="muted">{len(anchors)} of the {len(rows)} runs are shown in '
                     "detail below (the best, the worst, and those that failed or have findings); "
                     "the others have a row here and no curve.</p>")
    overlaid = [by_run[r.run].signals if r.run in anchors else None for r in rows]
    parts.append(img(overlay_png(overlaid), "the runs' curves overlaid",
                     "The curves by epoch of the runs shown in detail, in the colour of their "
                     "swatch above."))
    parts.append("</section>")
    return "\n".join(p for p in parts if p)
