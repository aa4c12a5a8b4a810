"""The drawing kit every figure of the HTML report shares: labels, points, canvas, PNG.

A figure is a `matplotlib.figure.Figure` on the Agg canvas (no pyplot
state, no window), saved as PNG bytes. matplotlib is imported when the
first figure is made (`figure`), so importing `tfguard.diagnose` stays
quick. Labels that come from logs go through `label`: no mathtext (`$`),
no control characters, bounded length.

Example:

>>> from tfguard.diagnose._report.plots.kit import figure, label, png
>>> label("a $x$ name\\n" + "z" * 60, 20)
'a \\\\$x\\\\$ name zzzz...'
>>> fig = figure(2, 1)
>>> _ = fig.subplots().plot([0, 1], [1, 0])
>>> png(fig)[:4]
b'\\x89PNG'
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING

import numpy as np

from tfguard import _tags
from tfguard.diagnose._inputs.signals import Series, Signals

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_LINES = 16
"""The most lines one axis draws (the rest are named in its title)."""
MAX_POINTS = 4000
"""The most points one line draws (longer series are strided)."""
DPI = 90
"""The resolution every PNG is saved at."""
MARK_COLORS = {"error": "#c0392b", "warning": "#d68910", "info": "#2e86c1"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def label(text, limit: int = 40) -> str:
    """A log-supplied label safe for matplotlib (no mathtext, no control characters), bounded."""
    text = _CONTROL.sub(" ", str(text)).replace("$", r"\$")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def use_steps(series: list[Series]) -> bool:
    """Whether every series has known global steps (else they are drawn by epoch)."""
    return bool(series) and all(s.has_steps for s in series)


def xy(s: Series, by_step: bool):
    """Points to draw: known x only, non-finite values as gaps, at most `MAX_POINTS` (strided)."""
    x = s.steps if by_step else s.epochs
    keep = x >= 0
    x, y = x[keep], np.where(np.isfinite(s.values[keep]), s.values[keep], np.nan)
    stride = -(-len(x) // MAX_POINTS)
    return (x[::stride], y[::stride]) if stride > 1 else (x, y)


def figure(width: float, height: float) -> Figure:
    """A new Agg-backed figure (matplotlib is imported on the first call: ~0.4 s)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes at `DPI`, trimmed to its content."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return buf.getvalue()


def finish(ax, xlabel: str, title: str, legend: bool = True) -> None:
    """Axis label, title, grid and (when anything is labelled) a legend."""
    ax.set_xlabel(xlabel)
    ax.set_title(label(title, 80))
    ax.grid(True, alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")


def onset_x(signals: Signals, finding, by_step: bool) -> int | None:
    """Where a finding's onset sits on an x axis of steps or epochs, or `None`."""
    x = finding.onset_step if by_step else finding.onset_epoch
    if x is None and by_step:
        x = signals.step_of_epoch(finding.onset_epoch)
    if x is None and not by_step:
        x = signals.epoch_of(finding.onset_step)
    return x


def mark(ax, signals: Signals, findings, by_step: bool) -> None:
    """Dashed vertical lines at the onsets of `findings`, each labelled with its symptom id."""
    placed: dict = {}
    for f in findings:
        x = onset_x(signals, f, by_step)
        if x is None:
            continue
        color = MARK_COLORS.get(f.severity, "#555555")
        ax.axvline(x, color=color, linestyle="--", linewidth=1.2, alpha=0.9)
        row = placed.setdefault(x, 0)
        placed[x] += 1
        ax.annotate(label(f.id, 30), xy=(x, 1.0 - 0.08 * row), xycoords=("data", "axes fraction"),
                    rotation=0, fontsize=7, color=color, ha="left", va="top",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": color, "alpha": 0.85})


SPIKE_COLORS = {"applied": "#c0392b", "warned": "#d68910"}
"""The colour of a spike mark by what was done (a rejected spike is drawn hollow, in grey)."""


def mark_spikes(ax, spikes: list[dict], by_step: bool) -> None:
    """A triangle at the step and value of every spike (`rules.spikes.spikes_of`): filled when applied."""
    if not by_step or not spikes:
        return
    for spike in spikes:
        color = SPIKE_COLORS.get(spike["action"])
        ax.scatter([spike["step"]], [spike["value"]], marker="v", s=42, zorder=4,
                   edgecolors=color or "#555555", facecolors=color or "none", linewidths=1.2)
    ax.scatter([], [], marker="v", color="#c0392b", label="loss spike")


def plot_losses(ax, curves: list[tuple[str, Series]], by_step: bool, *,
                batch_alpha: float = 0.45) -> None:
    """Draws loss curves: per-batch tags as thin faint lines, epoch tags with markers; log y if apt."""
    plotted = []
    for tag, s in curves:
        x, y = xy(s, by_step)
        style = ({"alpha": batch_alpha, "linewidth": 0.8} if tag.startswith(_tags.BATCH)
                 else {"marker": "o", "markersize": 3})
        ax.plot(x, y, label=tag, **style)
        plotted.append(y)
    positive_log(ax, plotted)


def positive_log(ax, values: list[np.ndarray]) -> None:
    """Switches the y axis to log scale when all values are positive and span > 50x."""
    finite = np.concatenate([v[np.isfinite(v)] for v in values]) if values else np.array([])
    if len(finite) and np.all(finite > 0) and finite.max() / max(finite.min(), 1e-300) > 50:
        ax.set_yscale("log")


PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94")
"""The colours of runs drawn together (matplotlib's tab10, then the light tab20 shades)."""


def run_color(index: int) -> str:
    """The colour of the `index`-th run in overlaid plots (and its swatch in the table)."""
    return PALETTE[index % len(PALETTE)]
