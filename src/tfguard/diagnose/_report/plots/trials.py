"""`trial_png`: one tried fix as a small multiple, the original's and the trial's curves overlaid.

A trial (one entry of the JSON report's `trials` list, see
`tfguard.remedies._trial`) carries both runs' per-epoch curves. Its panel
draws the curve its verdict was measured on (`val_loss`, else `loss`; a
rescored measure draws the logged curve of the same name) by epoch: the
original in grey, the trial in the colour of its verdict (green
`improved`, red `worse`, blue otherwise). Non-finite values are gaps; a
run whose every value is non-finite is named in the legend as such. The
title is the change tried and the measure before → after, so the panel
reads on its own; all panels have the same size, so several sit side by
side as small multiples.

Example:

>>> t = {"change": "learning_rate 10.0 → 1.0", "measure": "val_loss", "verdict": "improved",
...      "before": 2.3, "after": 0.4,
...      "curves": {"before": {"val_loss": [2.3, 2.3]}, "after": {"val_loss": [1.0, 0.4]}}}
>>> trial_png(t)[:4]
b'\\x89PNG'
>>> curve_key({"measure": "loss (rescored)", "curves": {}}), trial_png({"curves": {}}) is None
('loss', True)
"""

from __future__ import annotations

import io
import math

import numpy as np

from tfguard.diagnose._report.plots.kit import DPI, figure, finish, label, positive_log

VERDICT_COLORS = {"improved": "#1e8449", "worse": "#c0392b"}
"""The trial's line colour by verdict (any other verdict: `TRIAL_COLOR`)."""
TRIAL_COLOR = "#2e86c1"
ORIGINAL_COLOR = "#7f7f7f"
MIN_SPAN = 0.2
"""The smallest y span of a linear panel, relative to its largest value (20 %)."""
SIZE = (3.8, 2.7)
"""The size of one panel, in inches (at `kit.DPI`: 342 × 243 pixels, never trimmed)."""


def value(raw) -> float:
    """A number of the JSON report (`"NaN"`, `"Infinity"` as spelled there; `None` as NaN).

    Example:

    >>> value("Infinity"), value(None), value(0.5)
    (inf, nan, 0.5)
    """
    try:
        return float(raw)
    except (TypeError, ValueError):
        return math.nan


def curve_key(trial: dict) -> str:
    """The curve a trial's verdict was measured on: `"val_loss"` or `"loss"`."""
    measure = str(trial.get("measure") or "")
    return "val_loss" if measure.startswith("val_loss") else "loss"


def _values(trial: dict, which: str, key: str) -> np.ndarray:
    curve = (trial.get("curves") or {}).get(which) or {}
    return np.array([value(v) for v in (curve.get(key) or [])], dtype=float)


def trial_png(trial: dict) -> bytes | None:
    """The trial's panel as PNG bytes, or `None` when neither run has the measured curve.

    Args:
        trial: one entry of the `trials` list (`Trial.to_dict()`).

    Returns:
        PNG bytes of a `SIZE` panel.
    """
    key = curve_key(trial)
    before, after = _values(trial, "before", key), _values(trial, "after", key)
    if not len(before) and not len(after):
        return None
    verdict = str(trial.get("verdict") or "")
    fig = figure(*SIZE)
    ax = fig.subplots()
    drawn = []
    # the original dashed on top, so a trial that changed nothing shows both lines
    for values, name, color, style, z in ((before, "original", ORIGINAL_COLOR, "--", 3),
                                          (after, "trial", VERDICT_COLORS.get(verdict, TRIAL_COLOR),
                                           "-", 2)):
        if not len(values):
            continue
        finite = np.where(np.isfinite(values), values, np.nan)
        shown = name if np.isfinite(finite).any() else f"{name} (no finite value)"
        ax.plot(np.arange(1, len(values) + 1), finite, linestyle=style, color=color, linewidth=1.6,
                marker="o", markersize=3, label=shown, zorder=z)
        drawn.append(finite)
    positive_log(ax, drawn)
    if ax.get_yscale() == "linear":
        _readable_span(ax, drawn)
    from matplotlib.ticker import MaxNLocator

    epochs = max(len(before), len(after))
    if epochs <= 10:
        ax.set_xticks(range(1, epochs + 1))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    pad = 0.05 * (epochs - 1) if epochs > 1 else 0.5
    ax.set_xlim(1 - pad, epochs + pad)  # every epoch, also those whose values are NaN
    ax.set_ylabel(label(key, 20), fontsize=8)
    ax.tick_params(labelsize=7)
    finish(ax, "epoch", "")
    numbers = f"{trial.get('measure') or key} {_short(trial.get('before'))} → {_short(trial.get('after'))}"
    ax.set_title(f"{label(trial.get('change') or '', 46)}\n{label(numbers, 34)}: {label(verdict, 12)}",
                 fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()  # not trimmed: every panel has the same size
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _readable_span(ax, drawn: list[np.ndarray]) -> None:
    """No offset on the y axis, and a span of at least `MIN_SPAN` of the values' size.

    A change far below the verdict's margin then looks as flat as it is,
    not stretched over the whole panel.
    """
    ax.ticklabel_format(axis="y", useOffset=False)
    finite = np.concatenate([v[np.isfinite(v)] for v in drawn]) if drawn else np.array([])
    if not len(finite):
        return
    low, high = float(finite.min()), float(finite.max())
    need = MIN_SPAN * max(abs(low), abs(high))
    if need > 0 and high - low < need:
        middle = (low + high) / 2
        ax.set_ylim(middle - need / 2, middle + need / 2)


def _short(raw) -> str:
    number = value(raw)
    return f"{number:.4g}" if math.isfinite(number) else str(number)


__all__ = ["MIN_SPAN", "ORIGINAL_COLOR", "SIZE", "TRIAL_COLOR", "VERDICT_COLORS", "curve_key", "trial_png", "value"]
