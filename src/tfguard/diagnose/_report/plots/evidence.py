"""`evidence_png`: one finding's evidence, drawn where it lives.

Each symptom has the figure that shows why it was found:

- `exploding_gradient`, `vanishing_gradient`: the gradient norm of every
  layer (log scale), the named layer drawn thick, the onset marked.
- `dead_relu`, `saturated_activation`: the dead (or saturated) fraction of
  the named layer, and its share of exactly-zero gradients when logged,
  against the rule's default threshold.
- `unnormalized_input`: the statistics of the batches fed to the model
  (min..max band, mean +- std, the mean) beside the +-3 band a
  standardized input keeps to.
- `overfitting`: training and validation loss (and the validation metric)
  by epoch, the best validation epoch and the onset marked.
- `label_range`: the labels' min and max per batch against the range the
  loss and output accept.
- `learning_rate`: the learning rate (log scale) above the loss.
- `input_bound`: the share of each recorded step spent waiting for input.
- `loss_spike`: the batch losses (Keras's running mean undone) with every
  spike at its step and value (filled: applied; hollow: rejected).

Any other symptom (`nonfinite`, `no_learning`, `oscillating_loss`, ...)
lives in the loss curve itself, which the report already draws with every
onset marked: `evidence_png` gives `None` for it (`on_loss_curve` says
which), as for findings without a curve (`pipeline_order`, the invariants of
`tfguard.invariants`, ...).

Example:

>>> from tfguard.diagnose import Finding, Signals
>>> s = Signals.from_arrays({"activation/dead_fraction/dense": ([1, 2, 3, 4], [0.2, 0.8, 0.9, 0.9])})
>>> f = Finding("dead_relu", "warning", "dead", where="dense", onset_step=2)
>>> evidence_png(s, f)[:4]
b'\\x89PNG'
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tfguard import _tags
from tfguard.diagnose._causes import INVARIANTS
from tfguard.diagnose._inputs.signals import MissingSignals, Signals
from tfguard.diagnose._report.plots.curves import grad_norm_png, learning_rates, loss_png
from tfguard.diagnose._report.plots.kit import (
    figure,
    finish,
    label,
    mark,
    mark_spikes,
    png,
    positive_log,
    use_steps,
    xy,
)
from tfguard.diagnose._rules.spikes import per_batch, spikes_of
from tfguard.diagnose._thresholds import Thresholds

_DEFAULTS = Thresholds()
_NO_CURVE = frozenset({"pipeline_order", "python_in_pipeline", *INVARIANTS})  # numbers, not a curve


def _gradients(signals: Signals, finding) -> bytes | None:
    return grad_norm_png(signals, [finding], emphasize=(finding.where,) if finding.where else (),
                         title=f"gradient norm per layer ('{label(finding.where or 'all', 30)}' thick)")


def _layer_fraction(kind: str, threshold: float, what: str):
    def draw(signals: Signals, finding) -> bytes | None:
        layers = signals.per_layer(kind)
        name = finding.where if finding.where in layers else None
        if name is None and finding.where:
            short = str(finding.where).rsplit("/", 1)[-1]
            name = short if short in layers else None
        chosen = {name: layers[name]} if name else layers
        if not chosen:
            return None
        zero = signals.per_layer("zero_grad_fraction").get(name) if name else None
        by_step = use_steps(list(chosen.values()) + ([zero] if zero is not None else []))
        fig = figure(8, 3.0)
        ax = fig.subplots()
        for layer, s in list(chosen.items())[:16]:
            x, y = xy(s, by_step)
            ax.plot(x, y, linewidth=2.0 if name else 1.0, label=label(f"{what}: {layer}"))
        if zero is not None:
            x, y = xy(zero, by_step)
            ax.plot(x, y, linewidth=1.0, linestyle="-.", label=label(f"zero gradients: {name}"))
        ax.axhline(threshold, color="#555555", linestyle=":", linewidth=1.0,
                   label=f"threshold {threshold:g}")
        ax.set_ylim(-0.02, 1.02)
        mark(ax, signals, [finding], by_step)
        finish(ax, "step" if by_step else "epoch",
               f"{what} of '{label(name, 30)}'" if name else f"{what} per layer")
        return png(fig)
    return draw


def _input(signals: Signals, finding) -> bytes | None:
    found = {k: signals.series(t) for k, t in (("min", _tags.INPUT_MIN), ("max", _tags.INPUT_MAX),
                                                ("mean", _tags.INPUT_MEAN), ("std", _tags.INPUT_STD))}
    found = {k: s for k, s in found.items() if s is not None}
    if "mean" not in found and "std" not in found:
        return None
    by_step = use_steps(list(found.values()))
    fig = figure(8, 3.2)
    ax = fig.subplots()
    if "min" in found and "max" in found and len(found["min"]) == len(found["max"]):
        x, lo = xy(found["min"], by_step)
        _, hi = xy(found["max"], by_step)
        ax.fill_between(x, lo, hi, color="#aed6f1", alpha=0.6, label="min..max of the batch")
    if "mean" in found:
        x, mean = xy(found["mean"], by_step)
        if "std" in found and len(found["std"]) == len(found["mean"]):
            _, std = xy(found["std"], by_step)
            ax.fill_between(x, mean - std, mean + std, color="#2e86c1", alpha=0.45,
                            label="mean +- std")
        ax.plot(x, mean, color="#1b4f72", linewidth=1.4, label="mean")
    elif "std" in found:
        x, std = xy(found["std"], by_step)
        ax.plot(x, std, color="#1b4f72", linewidth=1.4, label="std")
    ax.axhspan(-3, 3, color="#27ae60", alpha=0.15, label="+-3: a standardized input")
    mark(ax, signals, [finding], by_step)
    finish(ax, "step" if by_step else "epoch", "input batch statistics")
    return png(fig)


def _overfitting(signals: Signals, finding) -> bytes | None:
    train, val = signals.series(_tags.train("loss")), signals.series(_tags.val("loss"))
    if train is None or val is None:
        return loss_png(signals, [finding])
    metric = next((n for n in signals.metric_names() if n not in ("loss", "learning_rate", "lr")
                   and signals.series(_tags.val(n)) is not None), None)
    fig = figure(8, 3.4 if metric is None else 5.6)
    axes = fig.subplots(1 if metric is None else 2, 1, squeeze=False, sharex=True)[:, 0]
    ax = axes[0]
    for tag, s in ((_tags.train("loss"), train), (_tags.val("loss"), val)):
        x, y = xy(s, False)
        ax.plot(x, y, marker="o", markersize=3, label=tag)
    best = finding.evidence.get("best_epoch")
    if isinstance(best, (int, float)) and np.any(val.epochs == int(best)):
        y = val.values[np.argmax(val.epochs == int(best))]
        ax.plot([best], [y], marker="*", markersize=13, color="#1e8449", linestyle="none",
                label=f"best val/loss (epoch {int(best)})")
    positive_log(ax, [train.values, val.values])
    mark(ax, signals, [finding], False)
    finish(ax, "epoch", "training and validation loss")
    if metric is not None:
        for p in ("train", "val"):
            s = signals.series(f"{p}/{metric}")
            if s is not None:
                x, y = xy(s, False)
                axes[1].plot(x, y, marker="o", markersize=3, label=label(f"{p}/{metric}"))
        mark(axes[1], signals, [finding], False)
        finish(axes[1], "epoch", metric)
    fig.tight_layout()
    return png(fig)


def _labels(signals: Signals, finding) -> bytes | None:
    lo, hi = signals.series(_tags.LABEL_MIN), signals.series(_tags.LABEL_MAX)
    if lo is None and hi is None:
        return loss_png(signals, [finding])
    by_step = use_steps([s for s in (lo, hi) if s is not None])
    fig = figure(8, 3.0)
    ax = fig.subplots()
    for name, s in (("label min", lo), ("label max", hi)):
        if s is not None:
            x, y = xy(s, by_step)
            ax.plot(x, y, marker="o", markersize=2.5, label=name)
    accepted = [finding.evidence.get(k) for k in ("accepted_min", "accepted_max")]
    if all(isinstance(v, (int, float)) and np.isfinite(v) for v in accepted):
        ax.axhspan(accepted[0], accepted[1], color="#27ae60", alpha=0.15, label="accepted range")
    mark(ax, signals, [finding], by_step)
    finish(ax, "step" if by_step else "epoch", "labels per batch")
    return png(fig)


def _learning_rate(signals: Signals, finding) -> bytes | None:
    rates = learning_rates(signals)
    loss = signals.series(_tags.batch("loss")) or signals.series(_tags.train("loss"))
    if not rates or loss is None:
        return loss_png(signals, [finding])
    by_step = use_steps([loss, *rates.values()])
    fig = figure(8, 5.0)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    x, y = xy(loss, by_step)
    top.plot(x, y, label=_tags.batch("loss") if loss is signals.series(_tags.batch("loss")) else _tags.train("loss"))
    positive_log(top, [y])
    mark(top, signals, [finding], by_step)
    finish(top, "", "loss")
    for tag, s in rates.items():
        x, y = xy(s, by_step)
        bottom.plot(x, np.where(y > 0, y, np.nan), marker="o", markersize=2.5, label=label(tag))
    bottom.set_yscale("log")
    finish(bottom, "step" if by_step else "epoch", "learning rate (log scale)")
    fig.tight_layout()
    return png(fig)


def _input_wait(signals: Signals, finding) -> bytes | None:
    s = signals.series(_tags.INPUT_WAIT_FRACTION)
    if s is None:
        return None
    by_step = use_steps([s])
    fig = figure(8, 2.8)
    ax = fig.subplots()
    x, y = xy(s, by_step)
    ax.plot(x, y, marker="o", markersize=2.5, label=_tags.INPUT_WAIT_FRACTION)
    ax.axhline(_DEFAULTS.input_wait_max, color="#555555", linestyle=":",
               label=f"threshold {_DEFAULTS.input_wait_max:g}")
    ax.set_ylim(-0.02, 1.02)
    mark(ax, signals, [finding], by_step)
    finish(ax, "step" if by_step else "epoch", "share of each step spent waiting for input")
    return png(fig)


def _spikes(signals: Signals, finding) -> bytes | None:
    try:
        losses, how = per_batch(signals)
    except MissingSignals:
        losses, how = None, ""
    spikes = spikes_of(signals, _DEFAULTS)[0]
    fig = figure(8, 3.2)
    ax = fig.subplots()
    if losses is not None:
        ax.plot(losses.steps, losses.values, linewidth=0.8, alpha=0.7, label=label(how, 60))
        positive_log(ax, [losses.values, np.asarray([s["value"] for s in spikes], np.float64)])
    mark_spikes(ax, spikes, True)
    finish(ax, "step", "loss, and each spike (filled: applied, hollow: rejected)")
    return png(fig)


_DRAW: dict[str, Callable] = {
    "exploding_gradient": _gradients,
    "vanishing_gradient": _gradients,
    "dead_relu": _layer_fraction("dead_fraction", _DEFAULTS.dead_fraction, "dead fraction"),
    "saturated_activation": _layer_fraction("saturated_fraction", _DEFAULTS.saturated_fraction,
                                            "saturated fraction"),
    "unnormalized_input": _input,
    "overfitting": _overfitting,
    "label_range": _labels,
    "learning_rate": _learning_rate,
    "input_bound": _input_wait,
    "loss_spike": _spikes,
}


def on_loss_curve(finding) -> bool:
    """Whether a finding's evidence is the loss curve itself (no figure of its own).

    Example:

    >>> from tfguard.diagnose import Finding
    >>> on_loss_curve(Finding("no_learning", "error", "")), on_loss_curve(Finding("dead_relu", "warning", ""))
    (True, False)
    """
    return finding.id not in _DRAW and finding.id not in _NO_CURVE


def evidence_png(signals: Signals | None, finding) -> bytes | None:
    """The figure of one finding's evidence, as PNG bytes (or `None` when nothing can be drawn).

    Args:
        signals: the run the finding is about (or `None`).
        finding: the `Finding`.

    Returns:
        PNG bytes, or `None` for a static finding, one that lives in the loss
        curve (`on_loss_curve`), or a run without the signals.
    """
    draw = _DRAW.get(finding.id)
    return None if signals is None or draw is None else draw(signals, finding)
