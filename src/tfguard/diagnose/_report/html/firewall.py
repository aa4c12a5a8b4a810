"""`firewall_section`: the HTML of a run's firewall violations, one row each, on a timeline.

Each violation shows its global step, its batch (and epoch, and batch of
the epoch), the stage and check that failed, the tensor / layer /
variable, the numbers (NaN, +Inf, -Inf of how many), what was done
(skipped, warned, raised), where the batch was quarantined (or why it could
not be) and what the replay localized. Beside it, `firewall_png` puts the
violations on the loss's step axis. When the logger counted more
violations than it recorded, the section says so.

Example:

>>> from tfguard.diagnose import Signals, diagnose
>>> record = {"step": 3, "batch": 3, "epoch": 0, "stage": "loss", "where": "loss",
...           "check": "finite", "counts": {"nan": 1.0}, "failed": [], "action": "skipped"}
>>> d = diagnose(Signals.from_arrays({"batch/loss": ([1, 2, 3, 4], [1.0, 0.9, 0.8, 0.7])},
...                                  guard_events=[record]))
>>> html = firewall_section(d)
>>> 'class="firewall"' in html, "skipped" in html, "data:image/png;base64," in html
(True, True, True)
"""

from __future__ import annotations

from tfguard.diagnose._engine import Diagnosis
from tfguard.diagnose._inputs.violations import Violation, counted, violations
from tfguard.diagnose._report.html.parts import e, img, table
from tfguard.diagnose._report.plots.firewall import firewall_png

MAX_ROWS = 200
"""The most violations listed in the table (the timeline draws them all)."""

_HEAD = ["step", "batch", "stage · check", "tensor / layer / variable", "values",
         "what was done", "quarantined", "replay localized"]
_WIDTHS = [6, 11, 11, 17, 12, 9, 18, 16]


def _position(v: Violation) -> str:
    text = "-" if v.batch is None else f"batch {v.batch}"
    if v.epoch is not None:
        text += f" (epoch {v.epoch}"
        text += f", batch {v.epoch_batch} of it)" if v.epoch_batch is not None else ")"
    return text


def _row(v: Violation) -> list[str]:
    action = v.action or "-"
    done = {"skipped": "skipped: update not applied", "warned": "warned: update applied",
            "raised": "raised: training stopped"}.get(action, action)
    if v.quarantine:
        kept = f"<code>{e(v.quarantine)}</code>"
    elif v.quarantine_error:
        kept = f'<span class="error">not saved: {e(v.quarantine_error)}</span>'
    else:
        kept = '<span class="muted">-</span>'
    also = ""
    others = [f for f in v.failed if f != f"{v.stage}: {v.where}"]
    if others:
        per = {}
        for slot in others:
            stage = slot.split(":", 1)[0]
            per[stage] = per.get(stage, 0) + 1
        shown = ", ".join(f"{k} ({n})" for k, n in per.items())
        also = f'<br><span class="muted">also failed: {e(shown)}</span>'
    return [
        e(v.step), e(_position(v)), f"{e(v.stage or '-')} · {e(v.check or '-')}",
        f'<span class="where">{e(v.where or "-")}</span>{also}', e(v.counts_text() or "-"),
        f'<span class="action {e(action)}">{e(done)}</span>', kept,
        e(v.replay) if v.replay else '<span class="muted">-</span>',
    ]


def firewall_section(d: Diagnosis) -> str:
    """The firewall section of one run, or `""` when the firewall flagged nothing.

    Args:
        d: the run's diagnosis (its signals: `guard_events`, `guard/events`,
            `guard/violations`).

    Returns:
        HTML: a heading, the timeline figure and one table row per violation.
    """
    s = d.signals
    if s is None:
        return ""
    found = violations(s)
    total = counted(s)
    if not found and not total:
        return ""
    actions = sorted({v.action for v in found if v.action})
    summary = (f"{len(found)} violation(s) recorded"
               + (f" ({', '.join(actions)})" if actions else "")
               + (f"; the logger counted {total}" if total is not None and total != len(found) else ""))
    rows = [_row(v) for v in found[:MAX_ROWS]]
    more = (f'<p class="muted">{len(found) - MAX_ROWS} more violation(s) are on the timeline only.</p>'
            if len(found) > MAX_ROWS else "")
    figure = img(firewall_png(s, found), f"firewall timeline of run {d.run}",
                 "The loss with each flagged step in red (above); each violation by the stage "
                 "that failed first, shaped by what was done (below).")
    return "\n".join([
        '<div class="firewall">', "<h3>Firewall</h3>", f"<p>{e(summary)}.</p>", figure,
        table(_HEAD, rows, "violations", _WIDTHS) if rows else "", more, "</div>",
    ])
