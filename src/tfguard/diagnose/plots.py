"""The figures of the HTML report, drawn with matplotlib's Agg canvas into PNG bytes.

Each function takes one run's `Signals` (and its findings) and returns the
PNG bytes of one figure, or `None` when the run lacks the signals. Figures
are built with `matplotlib.figure.Figure` (no pyplot state, no window), so
they are safe to draw from any thread and never touch the display.
matplotlib is imported when the first figure is drawn, so importing
`tfguard.diagnose` (and `tfguard diagnose`, which draws nothing) stays quick.

- `loss_png`: training / validation / per-batch loss, with the onset of each
  finding marked by a dashed line labelled with the symptom id.
- `metrics_png`: the other epoch metrics (accuracy, ...), train and val.
- `grad_norm_png`: the gradient norm of every layer (log scale).
- `activation_png`: dead and saturated fractions of every layer.

Example:

>>> from tfguard.diagnose import Signals
>>> from tfguard.diagnose.plots import loss_png
>>> png = loss_png(Signals.from_arrays({"train/loss": ([10, 20], [1.0, 0.5])}), [])
>>> png[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
True
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING

import numpy as np

from tfguard import tags
from tfguard.diagnose.signals import Series, Signals

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_MAX_LINES = 16
_MAX_POINTS = 4000
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MARK_COLORS = {"error": "#c0392b", "warning": "#d68910", "info": "#2e86c1"}


def _label(text: str, limit: int = 40) -> str:
    """A log-supplied label safe for matplotlib (no mathtext, no control characters), bounded."""
    text = _CONTROL.sub(" ", str(text)).replace("$", r"\$")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _use_steps(series: list[Series]) -> bool:
    return bool(series) and all(s.has_steps for s in series)


def _xy(s: Series, by_step: bool):
    """Points to draw: known x only, non-finite values as gaps, at most `_MAX_POINTS` (strided)."""
    x = s.steps if by_step else s.epochs
    keep = x >= 0
    x, y = x[keep], np.where(np.isfinite(s.values[keep]), s.values[keep], np.nan)
    stride = -(-len(x) // _MAX_POINTS)
    return (x[::stride], y[::stride]) if stride > 1 else (x, y)


def _figure(width: float, height: float) -> Figure:
    """A new Agg-backed figure (matplotlib is imported on the first call: ~0.4 s)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def _finish(ax, xlabel: str, title: str, legend: bool = True) -> None:
    ax.set_xlabel(xlabel)
    ax.set_title(_label(title, 80))
    ax.grid(True, alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")


def _mark(ax, signals: Signals, findings, by_step: bool) -> None:
    placed = {}
    for f in findings:
        x = f.onset_step if by_step else f.onset_epoch
        if x is None and by_step:
            x = signals.step_of_epoch(f.onset_epoch)
        if x is None and not by_step:
            x = signals.epoch_of(f.onset_step)
        if x is None:
            continue
        color = _MARK_COLORS.get(f.severity, "#555555")
        ax.axvline(x, color=color, linestyle="--", linewidth=1.2, alpha=0.9)
        row = placed.setdefault(x, 0)
        placed[x] += 1
        ax.annotate(_label(f.id, 30), xy=(x, 1.0 - 0.08 * row), xycoords=("data", "axes fraction"),
                    rotation=0, fontsize=7, color=color, ha="left", va="top",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": color, "alpha": 0.85})


def _positive_log(ax, values: list[np.ndarray]) -> None:
    finite = np.concatenate([v[np.isfinite(v)] for v in values]) if values else np.array([])
    if len(finite) and np.all(finite > 0) and finite.max() / max(finite.min(), 1e-300) > 50:
        ax.set_yscale("log")


def loss_png(signals: Signals, findings) -> bytes | None:
    """Loss curves with the onsets of `findings` marked, as PNG bytes (or `None`)."""
    curves = [(t, signals.series(t)) for t in (tags.batch("loss"), tags.train("loss"), tags.val("loss"))]
    curves = [(t, s) for t, s in curves if s is not None]
    if not curves:
        return None
    by_step = _use_steps([s for _, s in curves])
    fig = _figure(8, 3.6)
    ax = fig.subplots()
    plotted = []
    for tag, s in curves:
        x, y = _xy(s, by_step)
        style = {"alpha": 0.45, "linewidth": 0.8} if tag.startswith("batch/") else {"marker": "o", "markersize": 3}
        ax.plot(x, y, label=tag, **style)
        plotted.append(y)
    _positive_log(ax, plotted)
    _mark(ax, signals, findings, by_step)
    _finish(ax, "step" if by_step else "epoch", "loss")
    return _png(fig)


def metrics_png(signals: Signals) -> bytes | None:
    """The epoch metrics other than the loss, train and val, as PNG bytes (or `None`)."""
    names = [n for n in signals.metric_names() if n != "loss"][:6]
    curves = [(f"{p}/{n}", signals.series(f"{p}/{n}")) for n in names for p in ("train", "val")]
    curves = [(t, s) for t, s in curves if s is not None]
    if not curves:
        return None
    by_step = _use_steps([s for _, s in curves])
    fig = _figure(8, 3.2)
    ax = fig.subplots()
    for tag, s in curves:
        x, y = _xy(s, by_step)
        ax.plot(x, y, marker="o", markersize=3, label=_label(tag))
    _finish(ax, "step" if by_step else "epoch", "metrics")
    return _png(fig)


def _per_layer_lines(ax, layers: dict[str, Series], by_step: bool, style=None) -> list:
    plotted = []
    for name, s in list(layers.items())[:_MAX_LINES]:
        x, y = _xy(s, by_step)
        ax.plot(x, y, label=_label(name), linewidth=1.0, **(style or {}))
        plotted.append(y)
    return plotted


def grad_norm_png(signals: Signals, findings=()) -> bytes | None:
    """Per-layer gradient norms (log scale) with onsets marked, as PNG bytes (or `None`)."""
    layers = signals.per_layer("grad_norm")
    if not layers:
        return None
    by_step = _use_steps(list(layers.values()))
    values = np.concatenate([s.values for s in layers.values()])
    positive = values[np.isfinite(values) & (values > 0)]
    floor = float(positive.min()) / 10 if len(positive) else 1e-12
    title = "gradient norm per layer"
    if np.any(values[np.isfinite(values)] <= 0):
        # a dead layer's norm is exactly 0: draw it at a floor so the log scale shows it
        layers = {n: Series(s.steps, np.where(s.values > 0, s.values, floor), s.epochs)
                  for n, s in layers.items()}
        title += f" (0 drawn at {floor:.0e})"
    fig = _figure(8, 3.6)
    ax = fig.subplots()
    _per_layer_lines(ax, layers, by_step)
    ax.set_yscale("log")
    _mark(ax, signals, [f for f in findings if f.id in ("exploding_gradient", "vanishing_gradient",
                                                        "nonfinite")], by_step)
    if len(layers) > _MAX_LINES:
        title += f" (first {_MAX_LINES} of {len(layers)})"
    _finish(ax, "step" if by_step else "epoch", title)
    return _png(fig)


def activation_png(signals: Signals, findings=()) -> bytes | None:
    """Dead and saturated fractions per layer over time, as PNG bytes (or `None`)."""
    dead = signals.per_layer("dead_fraction")
    saturated = signals.per_layer("saturated_fraction")
    if not dead and not saturated:
        return None
    panels = [(k, v) for k, v in (("dead fraction (ReLU units <= 0 on the whole batch)", dead),
                                  ("saturated fraction (pre-activations outside +-5)", saturated)) if v]
    fig = _figure(8, 3.0 * len(panels))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (title, layers) in zip(axes, panels, strict=True):
        by_step = _use_steps(list(layers.values()))
        _per_layer_lines(ax, layers, by_step)
        ax.set_ylim(-0.02, 1.02)
        _mark(ax, signals, [f for f in findings if f.id in ("dead_relu", "saturated_activation")
                            and f.where in layers], by_step)
        _finish(ax, "step" if by_step else "epoch", title)
    fig.tight_layout()
    return _png(fig)
