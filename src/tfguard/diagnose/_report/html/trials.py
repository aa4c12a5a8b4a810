"""`trials_section`: the HTML of `tfguard run --try-fixes`: each remedy tried, its numbers, its curves.

One row per trial: the finding it answers (and the layer it names), the
change made as the line a person would write, the measure, its value
before → after with the relative change, and the verdict. Only
`improved` is shown as a fix; `no better`, `worse` and `not applied` say
"not a fix" whatever else a trial claims (the verdict word decides, not
its `fix` field). Below the table, how many trials improved the measure,
then one small multiple per trial (`plots.trials.trial_png`): the
original's and the trial's curves of the measure overlaid by epoch. Then
each trial's notes and the folder of its logs.

A trial is one entry of the JSON report's `trials` list (`Trial.to_dict()`,
see `tfguard.remedies._trial`) or any object with a `to_dict()` giving one,
so a page can be made from a saved report without TensorFlow.

Example:

>>> t = {"remedy": "clipnorm", "finding": "exploding_gradient", "change": "SGD(clipnorm=1.0)",
...      "measure": "val_loss", "before": 9.1, "after": 0.8, "verdict": "improved", "fix": True,
...      "curves": {"before": {"val_loss": [9.0, 9.1]}, "after": {"val_loss": [2.0, 0.8]}}}
>>> html = trials_section([t, dict(t, remedy="noop", after=9.0, verdict="no better", fix=True)])
>>> "SGD(clipnorm=1.0)" in html, "9.1 → 0.8 (−91%)" in html, html.count(">fix<")
(True, True, 1)
>>> trials_section(None), "No warning or error" in trials_section([])
('', True)
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from tfguard.diagnose._report.html.parts import e, img, table
from tfguard.diagnose._report.plots.trials import curve_key, trial_png, value

VERDICT_CLASS = {"improved": "improved", "no better": "no-better", "worse": "worse",
                 "not applied": "not-applied"}
"""The CSS class of each verdict (the row's and the verdict cell's)."""
DEFAULT_MARGIN = 0.05

_HEAD = ["#", "finding", "change tried", "measure", "before → after", "verdict"]
_WIDTHS = [4, 17, 37, 12, 17, 13]


def as_dicts(trials: Iterable) -> list[dict]:
    """Trials as the JSON report's dicts (objects with `to_dict()` converted).

    Example:

    >>> as_dicts([{"remedy": "x"}])
    [{'remedy': 'x'}]
    """
    return [t.to_dict() if hasattr(t, "to_dict") else dict(t) for t in trials]


def is_fix(trial: dict) -> bool:
    """Whether the numbers show the remedy helped: the verdict is `improved`, nothing else counts."""
    return trial.get("verdict") == "improved"


def measure_text(raw) -> str:
    """A measure: 4 significant digits, `nan` / `inf` spelled out, `-` when absent.

    Example:

    >>> measure_text(0.123456), measure_text("NaN"), measure_text(None)
    ('0.1235', 'nan', '-')
    """
    if raw is None:
        return "-"
    number = value(raw)
    if math.isnan(number):
        return "nan"
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    return f"{number:.4g}"


def change_text(before, after) -> str:
    """`"before → after"`, with the relative change when both are finite and `before` is not 0.

    Example:

    >>> change_text(2.0, 0.5), change_text(1.0, 1.2), change_text("NaN", 0.4)
    ('2 → 0.5 (−75%)', '1 → 1.2 (+20%)', 'nan → 0.4')
    """
    text = f"{measure_text(before)} → {measure_text(after)}"
    b, a = value(before), value(after)
    if math.isfinite(b) and math.isfinite(a) and b != 0:
        change = 100 * (a - b) / abs(b)
        size = f"{abs(change):.0f}" if abs(change) >= 10 else f"{abs(change):.2g}"
        text += f" ({'+' if change >= 0 else '−'}{size}%)"
    return text


def _verdict_cell(trial: dict) -> str:
    verdict = str(trial.get("verdict") or "-")
    klass = VERDICT_CLASS.get(verdict, "")
    tail = '<span class="fix">fix</span>' if is_fix(trial) else '<span class="muted">not a fix</span>'
    return f'<span class="verdict {klass}">{e(verdict)}</span><br>{tail}'


def _row(i: int, trial: dict) -> list[str]:
    where = f'<br><span class="muted">{e(trial["where"])}</span>' if trial.get("where") else ""
    remedy = f'<br><span class="muted">remedy {e(trial.get("remedy") or "-")}</span>'
    epochs = f'<br><span class="muted">{e(trial["epochs"])} epoch(s)</span>' if trial.get("epochs") else ""
    return [f'<a href="#trial-{i}">{i}</a>',
            f'<span class="sym">{e(trial.get("finding") or "-")}</span>{where}',
            f'<code class="change">{e(trial.get("change") or "-")}</code>{remedy}',
            e(trial.get("measure") or "-") + epochs,
            f'<span class="numbers">{e(change_text(trial.get("before"), trial.get("after")))}</span>',
            _verdict_cell(trial)]


def _figure(i: int, trial: dict) -> str:
    key = curve_key(trial)
    verdict = str(trial.get("verdict") or "-")
    alt = f"trial {i}: the original's and the trial's {key} by epoch"
    caption = f"#{i} {trial.get('change') or '-'}: {verdict}. Original dashed grey, trial solid."
    figure = img(trial_png(trial), alt, caption, css=f"trial {VERDICT_CLASS.get(verdict, '')}")
    return figure.replace("<figure ", f'<figure id="trial-{i}" ', 1) if figure else ""


def _notes(trials: list[dict]) -> str:
    items = []
    for i, t in enumerate(trials, 1):
        items += [f"<li>#{i} {e(t.get('remedy') or '-')}: {e(n)}</li>" for n in t.get("notes") or []]
        if t.get("run_dir"):
            items.append(f"<li>#{i} {e(t.get('remedy') or '-')}: logs in <code>{e(t['run_dir'])}</code></li>")
    return '<ul class="trial-notes">' + "".join(items) + "</ul>" if items else ""


def trials_section(trials: Iterable | None) -> str:
    """The "Tried fixes" section, or `""` when no trials were run (`None`).

    Args:
        trials: the trials (`Trial`s, `Trials`, or the JSON report's dicts);
            `None` when none were run, `[]` when there was nothing to try.

    Returns:
        HTML: heading, the table, the summary, the small multiples and the notes.
    """
    if trials is None:
        return ""
    trials = as_dicts(trials)
    parts = ['<section class="trials" id="trials">', "<h2>Tried fixes</h2>"]
    if not trials:
        parts += ['<p class="muted">No warning or error had a remedy to try.</p>', "</section>"]
        return "\n".join(parts)
    margin = value(trials[0].get("margin", DEFAULT_MARGIN))
    margin = DEFAULT_MARGIN if math.isnan(margin) else margin
    fixed = sum(is_fix(t) for t in trials)
    parts += [
        "<p>Each remedy was tried alone, by re-running the training with that one change, "
        "and judged by its measure (lower is better).</p>",
        table(_HEAD, [_row(i, t) for i, t in enumerate(trials, 1)], "trials", _WIDTHS),
        f'<p class="trials-summary {"healthy" if fixed else "warning"}">{fixed} of {len(trials)} '
        f"trial(s) improved the measure by more than {100 * margin:g}%; a trial that did not is "
        "no fix.</p>",
    ]
    figures = [f for f in (_figure(i, t) for i, t in enumerate(trials, 1)) if f]
    if figures:
        parts += ["<h3>Curves, original and trial</h3>", '<div class="multiples">', *figures, "</div>"]
    notes = _notes(trials)
    if notes:
        parts += ["<h3>Notes on the trials</h3>", notes]
    parts.append("</section>")
    return "\n".join(parts)


__all__ = ["VERDICT_CLASS", "as_dicts", "change_text", "is_fix", "measure_text", "trials_section"]
