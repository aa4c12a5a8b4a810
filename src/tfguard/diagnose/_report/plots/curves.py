"""The per-run figures of the HTML report, drawn with matplotlib's Agg canvas into PNG bytes.

Each function takes one run's `Signals` (and its findings) and returns the
PNG bytes of one figure, or `None` when the run lacks the signals. Figures
are built with `matplotlib.figure.Figure` (no pyplot state, no window), so
they are safe to draw from any thread and never touch the display.
matplotlib is imported when the first figure is drawn (`kit.figure`),
so importing `tfguard.diagnose` (and `tfguard diagnose`, which draws
nothing) stays quick.

- `loss_png`: training / validation / per-batch loss, with the onset of each
  finding marked by a dashed line labelled with the symptom id, and every
  loss spike by a triangle (filled: applied; hollow: rejected).
- `metrics_png`: the other epoch metrics (accuracy, ...), train and val; the
  learning rate is never one of them.
- `learning_rate_png`: every learning rate the run logged (one per
  optimizer), on its own log-scale axis.
- `grad_norm_png`: the gradient norm of every layer (log scale).
- `activation_png`: dead and saturated fractions of every layer.

Example:

>>> from tfguard.diagnose import Signals
>>> from tfguard.diagnose._report.plots.curves import learning_rate_png, loss_png
>>> s = Signals.from_arrays({"train/loss": ([10, 20], [1.0, 0.5]),
...                          "optimizer/learning_rate": ([10, 20], [1e-3, 1e-4])})
>>> loss_png(s, [])[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
True
>>> learning_rate_png(s)[:4]
b'\\x89PNG'
"""

from __future__ import annotations

import numpy as np

from tfguard import _tags
from tfguard.diagnose._inputs.signals import Series, Signals
from tfguard.diagnose._report.plots.kit import (
    MAX_LINES,
    figure,
    finish,
    label,
    mark,
    mark_spikes,
    plot_losses,
    png,
    use_steps,
    xy,
)
from tfguard.diagnose._rules.spikes import spikes_of
from tfguard.diagnose._thresholds import Thresholds

_RATE_NAMES = ("learning_rate", "lr")


def is_learning_rate(tag: str) -> bool:
    """Whether a scalar tag holds a learning rate (of any optimizer), never a metric.

    Example:

    >>> [is_learning_rate(t) for t in ("optimizer/learning_rate", "optimizer/generator/learning_rate",
    ...                                "train/lr", "val/accuracy")]
    [True, True, True, False]
    """
    parts = tag.split("/")
    return any(p in _RATE_NAMES for p in parts[1:]) or (
        tag.startswith(_tags.OPTIMIZER) and "learning_rate" in tag)


def learning_rates(signals: Signals) -> dict[str, Series]:
    """Every learning-rate series of a run, by tag (one per optimizer when it logged several)."""
    return {t: s for t, s in signals.scalars.items() if is_learning_rate(t) and len(s)}


def loss_png(signals: Signals, findings) -> bytes | None:
    """Loss curves with the onsets of `findings` marked, as PNG bytes (or `None`)."""
    curves = [(t, signals.series(t)) for t in (_tags.batch("loss"), _tags.train("loss"), _tags.val("loss"))]
    curves = [(t, s) for t, s in curves if s is not None]
    if not curves:
        return None
    by_step = use_steps([s for _, s in curves])
    fig = figure(8, 3.6)
    ax = fig.subplots()
    plot_losses(ax, curves, by_step)
    mark(ax, signals, findings, by_step)
    if any(f.id == "loss_spike" for f in findings):
        mark_spikes(ax, spikes_of(signals, Thresholds())[0], by_step)
    finish(ax, "step" if by_step else "epoch", "loss")
    return png(fig)


def metrics_png(signals: Signals) -> bytes | None:
    """The epoch metrics other than the loss and the learning rate, train and val, as PNG bytes (or `None`)."""
    names = [n for n in signals.metric_names() if n != "loss" and n not in _RATE_NAMES][:6]
    curves = [(t, signals.series(t)) for n in names for t in (_tags.train(n), _tags.val(n))]
    curves = [(t, s) for t, s in curves if s is not None and not is_learning_rate(t)]
    if not curves:
        return None
    by_step = use_steps([s for _, s in curves])
    fig = figure(8, 3.2)
    ax = fig.subplots()
    for tag, s in curves:
        x, y = xy(s, by_step)
        ax.plot(x, y, marker="o", markersize=3, label=label(tag))
    finish(ax, "step" if by_step else "epoch", "metrics")
    return png(fig)


def learning_rate_png(signals: Signals) -> bytes | None:
    """The learning rate(s) over time on a log-scale axis of their own, as PNG bytes (or `None`)."""
    rates = learning_rates(signals)
    if not rates:
        return None
    by_step = use_steps(list(rates.values()))
    fig = figure(8, 2.4)
    ax = fig.subplots()
    for tag, s in list(rates.items())[:MAX_LINES]:
        x, y = xy(s, by_step)
        y = np.where(y > 0, y, np.nan)  # a zero rate has no place on a log axis
        ax.plot(x, y, marker="o", markersize=2.5, linewidth=1.2, label=label(tag))
    values = np.concatenate([s.values for s in rates.values()])
    positive = values[np.isfinite(values) & (values > 0)]
    if len(positive):
        ax.set_yscale("log")
        lo, hi = float(positive.min()), float(positive.max())
        if hi / lo < 10:  # a constant (or nearly) rate: a decade around it, not an axis edge
            ax.set_ylim(lo / 3.2, hi * 3.2)
    finish(ax, "step" if by_step else "epoch", "learning rate (log scale)")
    return png(fig)


def _per_layer_lines(ax, layers: dict[str, Series], by_step: bool, emphasize=()) -> list:
    plotted = []
    for name, s in list(layers.items())[:MAX_LINES]:
        x, y = xy(s, by_step)
        width, alpha = (2.4, 1.0) if name in emphasize else (1.0, 0.8 if emphasize else 1.0)
        ax.plot(x, y, label=label(name), linewidth=width, alpha=alpha)
        plotted.append(y)
    return plotted


def grad_norm_png(signals: Signals, findings=(), *, emphasize=(), title: str | None = None) -> bytes | None:
    """Per-layer gradient norms (log scale) with onsets marked, as PNG bytes (or `None`).

    Args:
        signals: the run.
        findings: findings whose onsets to mark (gradient and non-finite
            ones only). Defaults to `()`.
        emphasize: layer names drawn thicker. Defaults to `()`.
        title: the axis title. Defaults to `None` ("gradient norm per layer").
    """
    layers = signals.per_layer("grad_norm")
    if not layers:
        return None
    by_step = use_steps(list(layers.values()))
    values = np.concatenate([s.values for s in layers.values()])
    positive = values[np.isfinite(values) & (values > 0)]
    floor = float(positive.min()) / 10 if len(positive) else 1e-12
    title = title or "gradient norm per layer"
    if np.any(values[np.isfinite(values)] <= 0):
        # a dead layer's norm is exactly 0: draw it at a floor so the log scale shows it
        layers = {n: Series(s.steps, np.where(s.values > 0, s.values, floor), s.epochs)
                  for n, s in layers.items()}
        title += f" (0 drawn at {floor:.0e})"
    fig = figure(8, 3.6)
    ax = fig.subplots()
    _per_layer_lines(ax, layers, by_step, emphasize)
    ax.set_yscale("log")
    mark(ax, signals, [f for f in findings if f.id in ("exploding_gradient", "vanishing_gradient",
                                                       "nonfinite")], by_step)
    if len(layers) > MAX_LINES:
        title += f" (first {MAX_LINES} of {len(layers)})"
    finish(ax, "step" if by_step else "epoch", title)
    return png(fig)


def activation_png(signals: Signals, findings=()) -> bytes | None:
    """Dead and saturated fractions per layer over time, as PNG bytes (or `None`)."""
    dead = signals.per_layer("dead_fraction")
    saturated = signals.per_layer("saturated_fraction")
    if not dead and not saturated:
        return None
    panels = [(k, v) for k, v in (("dead fraction (ReLU units <= 0 on the whole batch)", dead),
                                  ("saturated fraction (pre-activations outside +-5)", saturated)) if v]
    fig = figure(8, 3.0 * len(panels))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (title, layers) in zip(axes, panels, strict=True):
        by_step = use_steps(list(layers.values()))
        _per_layer_lines(ax, layers, by_step)
        ax.set_ylim(-0.02, 1.02)
        mark(ax, signals, [f for f in findings if f.id in ("dead_relu", "saturated_activation")
                           and f.where in layers], by_step)
        finish(ax, "step" if by_step else "epoch", title)
    fig.tight_layout()
    return png(fig)
