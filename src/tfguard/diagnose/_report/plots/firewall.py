"""`firewall_png`: the firewall's violations on a timeline beside the loss.

Two panels share the step axis. Above, the loss (per batch and per epoch)
with a red band at every step the firewall flagged, so the person sees
what the loss did around each one. Below, one marker per violation on the
row of the stage that failed first (data, forward, loss, gradients,
update), shaped by what was done (skipped: x, warned: triangle, raised:
square). Epoch ends are dotted lines on both.

Example:

>>> from tfguard.diagnose import Signals
>>> from tfguard.diagnose._inputs.violations import Violation
>>> s = Signals.from_arrays({"batch/loss": (list(range(1, 21)), [1.0 - i / 40 for i in range(20)])})
>>> firewall_png(s, [Violation(step=7, stage="loss", where="loss", action="skipped")])[:4]
b'\\x89PNG'
>>> firewall_png(s, []) is None
True
"""

from __future__ import annotations

import numpy as np

from tfguard import _tags
from tfguard.diagnose._inputs.signals import Signals
from tfguard.diagnose._inputs.violations import Violation
from tfguard.diagnose._report.plots.kit import (
    figure,
    finish,
    label,
    plot_losses,
    png,
)

_ACTIONS = {"skipped": ("x", "#c0392b"), "warned": ("^", "#d68910"), "raised": ("s", "#7b241c")}


def firewall_png(signals: Signals, found: list[Violation]) -> bytes | None:
    """The violations on a timeline beside the loss, as PNG bytes (or `None` without violations).

    Args:
        signals: the run.
        found: its violations (`tfguard.diagnose._inputs.violations.violations`).

    Returns:
        PNG bytes, or `None` when `found` is empty.
    """
    if not found:
        return None
    curves = [(t, signals.series(t)) for t in (_tags.batch("loss"), _tags.train("loss"))]
    curves = [(t, s) for t, s in curves if s is not None and s.has_steps]
    rows = [c for c in _tags.GUARD_STAGES if c in {v.stage for v in found}] or list(_tags.GUARD_STAGES)
    rows += sorted({v.stage for v in found} - set(rows))
    fig = figure(8, 2.0 + 0.28 * len(rows) + (2.6 if curves else 0))
    if curves:
        top, bottom = fig.subplots(2, 1, sharex=True,
                                   gridspec_kw={"height_ratios": [2.6, 0.9 + 0.28 * len(rows)]})
        plot_losses(top, curves, True, batch_alpha=0.5)
        for v in found:
            top.axvspan(v.step - 0.5, v.step + 0.5, color="#c0392b", alpha=0.25, linewidth=0)
        finish(top, "", "loss, with the steps the firewall flagged (red)")
    else:
        bottom = fig.subplots()
    for action in sorted({v.action for v in found}):
        marker, color = _ACTIONS.get(action, ("o", "#555555"))
        points = [(v.step, rows.index(v.stage)) for v in found if v.action == action]
        bottom.scatter([p[0] for p in points], [p[1] for p in points], marker=marker, color=color,
                       s=46, label=label(action or "unknown", 20), zorder=3)
    bottom.set_yticks(range(len(rows)), [label(r, 14) for r in rows])
    bottom.set_ylim(-0.6, len(rows) - 0.4)
    ends = signals.epoch_end_steps
    if ends is not None and len(ends):
        lo, hi = min(v.step for v in found), max(v.step for v in found)
        if curves:
            lo = min(lo, *(int(s.steps.min()) for _, s in curves))
            hi = max(hi, *(int(s.steps.max()) for _, s in curves))
        for end in np.asarray(ends)[(np.asarray(ends) >= lo) & (np.asarray(ends) <= hi)][:200]:
            for ax in ([top, bottom] if curves else [bottom]):
                ax.axvline(end, color="#888888", linestyle=":", linewidth=0.8)
    from matplotlib.ticker import MaxNLocator  # matplotlib is loaded by now (figure)

    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    finish(bottom, "step", f"{len(found)} violation(s) by stage; dotted lines end epochs")
    fig.tight_layout()
    return png(fig)
