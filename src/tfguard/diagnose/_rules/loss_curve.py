"""Rules on the loss curves: `oscillating_loss`, `slow_convergence`, `no_learning`, `overfitting`.

Published starting points: AUTOTRAINER (ICSE 2021) counts swings between
local maxima and minima of the accuracy (`zeta=0.03`, `eta=0.2`), calls a
run slow when no epoch gains more than `delta=0.01` accuracy and
not converged below `Theta=0.7`, and counts epochs where training loss falls
while test loss rises; TheDeepChecker requires the loss to decrease.

tfguard works on the loss, which every run logs (accuracy only exists for
classifiers), and judges it against the loss *before* training: the first
per-batch losses when logged, else the chance-level loss of a cross-entropy
model, else (stock Keras logs) the end of epoch 0, where it asks for flat
accuracy too. A swing only counts when the loss rises by a relative
(`osc_rise_rel`) *and* an absolute amount (`osc_rise_abs` of the initial
loss), so the jitter of a nearly-zero loss never looks like oscillation; the
per-batch loss is first summarized by window medians. `slow_convergence`
asks for a curve that is still falling at an even pace (it has not bent)
yet has removed less than `slow_max_progress` of the initial loss.
`overfitting` asks for the validation loss to stay `overfit_rise` above its
minimum for `overfit_epochs` epochs while the training loss stays below its
value at that best epoch; it does not judge a validation set of fewer than
`overfit_min_val_examples` examples (`validation_examples`, known when the fit's
validation data is in memory).

Example:

>>> from tfguard.diagnose import Signals, Thresholds
>>> from tfguard.diagnose._rules.loss_curve import overfitting
>>> s = Signals.from_arrays({
...     "train/loss": (None, [1.0, 0.7, 0.5, 0.4, 0.3, 0.2, 0.1]),
...     "val/loss": (None, [1.0, 0.8, 0.7, 0.8, 0.9, 1.0, 1.1])})
>>> overfitting(s, Thresholds())[0].onset_epoch
3
"""

from __future__ import annotations

import numpy as np

from tfguard import _tags
from tfguard._findings import Finding, fmt
from tfguard.diagnose._inputs.signals import MissingSignals, Series, Signals
from tfguard.diagnose._rules.base import (
    accuracy_curve,
    at_chance,
    finite_epoch_curve,
    first_persistent,
    initial_loss,
    onset,
    remark_when_improving,
    require_epochs,
)
from tfguard.diagnose._thresholds import Thresholds

_SOURCES = {
    "batch": "the first logged batch losses",
    "chance": "the chance-level loss of the model's cross-entropy",
    "epoch0": "the loss at the end of epoch 0",
}


def _train_curve(signals: Signals, thresholds: Thresholds) -> Series:
    return require_epochs(finite_epoch_curve(signals, _tags.train("loss")), "train/loss", thresholds)


def _at(signals: Signals, s: Series, index: int) -> dict:
    at = onset(s, index)
    if at["onset_epoch"] is None:
        at["onset_epoch"] = signals.epoch_of(at["onset_step"])
    return at


def _lr_hint(signals: Signals) -> str:
    for key in ("learning_rate", "lr"):
        if key in signals.hparams:
            return f" (learning_rate={signals.hparams[key]})"
    lr = signals.series(_tags.LEARNING_RATE)
    if lr is not None:
        return f" (learning_rate={fmt(lr.values[-1])})"
    lr = ((signals.model or {}).get("optimizer") or {}).get("learning_rate")
    return f" (learning_rate={fmt(lr)})" if isinstance(lr, (int, float)) else ""


# -- no_learning ------------------------------------------------------------------
def no_learning(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports a training loss that has not decreased at all, or a classifier that stays at chance.

    A training accuracy that climbs `nl_acc_rise` above its first epoch is
    learning, even while the loss barely moves (issue 46: two embedding
    models rising from 51 % to 66 %); a classifier at chance (`at_chance`)
    whose loss has stopped falling at an even pace (it bent flat, as
    `slow_convergence` reads a curve) has learnt nothing, even where its
    loss fell from a bad start.

    Args:
        signals: the run, with epoch-level `train/loss`.
        thresholds: uses `min_epochs`, `nl_min_drop`, `nl_acc_delta`, `nl_acc_rise`,
            `satisfied_accuracy`, `chance_margin`, `slow_bend`.

    Returns:
        At most one finding (error).

    Raises:
        MissingSignals: with fewer than `min_epochs` finite epochs of `train/loss`.
    """
    curve = _train_curve(signals, thresholds)
    init, source = initial_loss(signals, curve)
    acc = accuracy_curve(signals)
    if acc is not None and float(np.max(acc.values)) >= thresholds.satisfied_accuracy:
        return []
    best = float(np.min(curve.values))
    drop = (init - best) / max(abs(init), 1e-12)
    chance = at_chance(signals, thresholds)
    if chance is not None and _still_falling(curve, init, thresholds):
        chance = None  # at chance yet, but on its way down: slow_convergence's, not this rule's
    if drop >= thresholds.nl_min_drop and chance is None:
        return []
    if chance is None and acc is not None and len(acc) > 1 and (
            float(np.max(acc.values) - acc.values[0]) >= thresholds.nl_acc_rise
            or (source == "epoch0" and float(np.max(np.diff(acc.values))) >= thresholds.nl_acc_delta)):
        return []  # an accuracy that climbs is learning, whatever the loss's first batches said
    evidence = {"initial_loss": init, "best_loss": best, "final_loss": float(curve.values[-1]),
                "relative_drop": drop, "epochs": len(curve)}
    if acc is not None:
        evidence["best_accuracy"] = float(np.max(acc.values))
    if drop >= thresholds.nl_min_drop:  # the loss fell, from a bad start to a uniform guess's
        evidence.update({f"chance_{k}": v for k, v in chance.items()})
        seen = (f"best accuracy {fmt(chance['best_accuracy'])} against {fmt(chance['chance_accuracy'])} "
                "for a uniform guess" if "best_accuracy" in chance else
                f"best loss {fmt(chance['best_loss'])} against {fmt(chance['chance_loss'])} for a "
                "uniform guess")
        message = (f"the model never did better than chance over {len(curve)} epochs: {seen} (the "
                   f"loss fell from {fmt(init)} only to where a constant prediction scores).")
    else:
        trend = "rose" if curve.values[-1] > init * (1 + thresholds.nl_min_drop) else "stayed flat"
        message = (f"the training loss {trend} over {len(curve)} epochs: best {fmt(best)} vs "
                   f"{fmt(init)} from {_SOURCES[source]} (a drop of {fmt(100 * drop)}%, "
                   f"needs {fmt(100 * thresholds.nl_min_drop)}%).")
    return [Finding(
        "no_learning", "error", message,
        **_at(signals, curve, 0), evidence=evidence,
        suggestion=(f"Check the learning rate{_lr_hint(signals)} is not 0 or tiny, that the "
                    "layers are trainable, that labels match the outputs and the loss fits "
                    "the output activation, and that no layer is dead."),
    )]


def _still_falling(curve: Series, init: float, thresholds: Thresholds) -> bool:
    """Whether the loss still falls at an even pace: its last epochs all lower than the one before,
    and its second half's drop at least `1 / slow_bend` of its first half's (it has not bent flat)."""
    path = np.concatenate([[init], curve.values])
    if len(path) < 3 or not np.all(np.diff(path[-3:]) < 0):
        return False
    mid = len(path) // 2
    first_half, second_half = path[0] - path[mid], path[mid] - path[-1]
    return second_half > 0 and first_half <= thresholds.slow_bend * second_half


# -- slow_convergence ---------------------------------------------------------------
def slow_convergence(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports a training loss that falls steadily but far too slowly.

    Args:
        signals: the run, with epoch-level `train/loss`.
        thresholds: uses `min_epochs`, `slow_min_steps`, `slow_max_progress`,
            `slow_bend`, `nl_min_drop`, `satisfied_accuracy`.

    Returns:
        At most one finding (warning).

    Raises:
        MissingSignals: with too few epochs, or with stock logs that give
            neither an initial loss nor an accuracy.
    """
    curve = _train_curve(signals, thresholds)
    init, source = initial_loss(signals, curve)
    acc = accuracy_curve(signals)
    if source == "epoch0" and acc is None:
        raise MissingSignals(
            "no loss before training (batch/loss, or a model description with a cross-entropy "
            "loss) and no accuracy: a slow start cannot be told from a converged run"
        )
    if acc is not None and float(np.max(acc.values)) >= thresholds.satisfied_accuracy:
        return []
    if curve.has_steps and int(curve.steps[-1]) < thresholds.slow_min_steps:
        return []
    values = curve.values
    progress = (init - values[-1]) / max(abs(init), 1e-12)
    best_drop = (init - float(np.min(values))) / max(abs(init), 1e-12)
    if best_drop < thresholds.nl_min_drop or progress >= thresholds.slow_max_progress:
        return []
    path = np.concatenate([[init], values])
    tail = np.diff(path[-3:])
    if not np.all(tail < 0):
        return []  # flat or bouncing at the end: not a steady slow descent
    mid = len(path) // 2
    first_half, second_half = path[0] - path[mid], path[mid] - path[-1]
    if second_half <= 0 or first_half > thresholds.slow_bend * second_half:
        return []
    per_epoch = (path[mid] - path[-1]) / max(1, len(path) - 1 - mid)
    to_go = float(values[-1]) / per_epoch if per_epoch > 0 else float("inf")
    evidence = {"initial_loss": init, "final_loss": float(values[-1]), "progress": progress,
                "loss_drop_per_epoch": per_epoch, "epochs": len(curve)}
    if acc is not None:
        evidence["final_accuracy"] = float(acc.values[-1])
    return [Finding(
        "slow_convergence", "warning",
        f"after {len(curve)} epochs the training loss fell only {fmt(100 * progress)}% from "
        f"{fmt(init)} ({_SOURCES[source]}) to {fmt(values[-1])}, at an even "
        f"{fmt(per_epoch)} per epoch (~{fmt(to_go)} more epochs at this pace).",
        **_at(signals, curve, 0), evidence=evidence,
        suggestion=(f"Raise the learning rate{_lr_hint(signals)} (try 10x), use Adam instead "
                    "of plain SGD, normalize the inputs, or use a learning-rate finder."),
    )]


# -- oscillating_loss ----------------------------------------------------------------
def _swings(values: np.ndarray, scale: float, thresholds: Thresholds) -> tuple[np.ndarray, int]:
    """Significant rises and the number of direction reversals of a loss sequence.

    A move counts when it exceeds `osc_rise_rel` of the previous value and
    `osc_rise_abs` of the initial loss; a reversal is a significant rise
    after a significant fall or the other way round (AUTOTRAINER pairs local
    maxima with minima). A loss that only climbs (divergence) has no reversal.
    """
    moves = np.diff(values)
    limit = np.maximum(thresholds.osc_rise_rel * np.abs(values[:-1]),
                       thresholds.osc_rise_abs * abs(scale))
    signs = np.sign(moves) * (np.abs(moves) > limit)
    rises = np.flatnonzero(signs > 0) + 1
    significant = signs[signs != 0]
    reversals = int(np.count_nonzero(np.diff(significant))) if len(significant) > 1 else 0
    return rises, reversals


def _windowed(series: Series, window: int) -> Series | None:
    keep = np.isfinite(series.values)
    steps, values, epochs = series.steps[keep], series.values[keep], series.epochs[keep]
    n = len(values) // window
    if n < 2:
        return None
    cut = n * window
    med = np.median(values[:cut].reshape(n, window), axis=1)
    starts = np.arange(n) * window
    return Series(steps[starts], med, epochs[starts])


def oscillating_loss(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports a training loss that keeps swinging up instead of decreasing.

    Args:
        signals: the run, with epoch-level `train/loss` and/or `batch/loss`.
        thresholds: uses `osc_rise_rel`, `osc_rise_abs`, `osc_rate`,
            `osc_min_swings`, `osc_window`, `min_epochs`.

    Returns:
        At most one finding (warning).

    Raises:
        MissingSignals: with neither enough epochs nor enough batch losses.
    """
    candidates = []
    curve = finite_epoch_curve(signals, _tags.train("loss"))
    if curve is not None and len(curve) >= thresholds.min_epochs:
        candidates.append(("epoch", curve))
    batch = signals.series(_tags.batch("loss"))
    if batch is not None:
        windows = _windowed(batch, thresholds.osc_window)
        if windows is not None and len(windows) >= thresholds.min_epochs:
            candidates.append(("batch", windows))
    if not candidates:
        raise MissingSignals(
            f"needs {thresholds.min_epochs} epochs of train/loss or "
            f"{thresholds.min_epochs * thresholds.osc_window} batch/loss observations"
        )
    hits = []
    for kind, s in candidates:
        scale = float(s.values[0])
        if curve is not None:
            scale, _ = initial_loss(signals, curve)
        idx, reversals = _swings(s.values, scale, thresholds)
        intervals = len(s) - 1
        if (len(idx) and reversals >= thresholds.osc_min_swings
                and reversals >= thresholds.osc_rate * intervals):
            step, epoch = s.at(int(idx[0]))
            key = step if step is not None else 2**62
            hits.append((key, epoch if epoch is not None else 2**62, kind, s, idx, scale, reversals))
    if not hits:
        return []
    hits.sort(key=lambda h: (h[0], h[1]))
    _, _, kind, s, idx, scale, reversals = hits[0]
    rises = s.values[idx] - s.values[idx - 1]
    with np.errstate(all="ignore"):
        relative = float(np.median(rises / np.abs(s.values[idx - 1])))
    unit = "epochs" if kind == "epoch" else f"windows of {thresholds.osc_window} batch losses"
    evidence = {"reversals": reversals, "sharp_rises": len(idx), "intervals": len(s) - 1,
                "median_rise": float(np.median(rises)),
                "median_relative_rise": relative,
                "initial_loss": scale}
    return remark_when_improving([Finding(
        "oscillating_loss", "warning",
        f"the training loss changed direction {reversals} times over {len(s)} {unit}, with "
        f"{len(idx)} sharp rises (median +{fmt(100 * evidence['median_relative_rise'])}%), "
        "instead of decreasing.",
        **_at(signals, s, int(idx[0])), evidence=evidence,
        suggestion=(f"Lower the learning rate{_lr_hint(signals)} (try 3-10x smaller) or add "
                    "a decay schedule, increase the batch size, and clip gradients."),
    )], signals, thresholds)


# -- overfitting --------------------------------------------------------------------
def overfitting(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports a validation loss that rises while the training loss keeps falling.

    Args:
        signals: the run, with epoch-level `train/loss` and `val/loss`.
        thresholds: uses `min_epochs`, `overfit_rise`, `overfit_epochs`.

    Returns:
        At most one finding (warning), its onset the epoch after the best one.

    Raises:
        MissingSignals: without validation loss, with too few epochs, or with a
            validation set too small to measure generalization.
    """
    train = finite_epoch_curve(signals, _tags.train("loss"))
    val = finite_epoch_curve(signals, _tags.val("loss"))
    if val is None:
        raise MissingSignals("no epoch-level val/loss (fit without validation data)")
    examples = signals.hparams.get("validation_examples")
    if isinstance(examples, (int, float)) and examples < thresholds.overfit_min_val_examples:
        raise MissingSignals(
            f"a validation set of {int(examples)} example(s) is too small to judge overfitting "
            f"(needs {thresholds.overfit_min_val_examples}): its loss measures those examples, "
            "not generalization")
    train = require_epochs(train, "train/loss", thresholds)
    val = require_epochs(val, "val/loss", thresholds)
    train_at = dict(zip(train.epochs.tolist(), train.values.tolist(), strict=True))
    best = int(np.argmin(val.values))
    vmin = float(val.values[best])
    best_epoch = int(val.epochs[best])
    if best_epoch not in train_at:
        return []
    after = val.values[best + 1 :]
    above = after > vmin * (1 + thresholds.overfit_rise) + 1e-12
    train_ok = np.array([train_at.get(int(e), np.inf) <= train_at[best_epoch] * 1.01
                         for e in val.epochs[best + 1 :]], dtype=bool)
    start = first_persistent(above & train_ok, thresholds.overfit_epochs)
    if start is None:
        return []
    final_val = float(val.values[-1])
    final_train = train_at.get(int(val.epochs[-1]), float(train.values[-1]))
    evidence = {"best_epoch": best_epoch, "best_val_loss": vmin, "final_val_loss": final_val,
                "val_rise": final_val / vmin - 1 if vmin > 0 else float("inf"),
                "train_loss_at_best": train_at[best_epoch], "final_train_loss": final_train,
                "final_gap": final_val - final_train}
    return [Finding(
        "overfitting", "warning",
        f"the validation loss bottomed at {fmt(vmin)} in epoch {best_epoch}, then rose to "
        f"{fmt(final_val)} (+{fmt(100 * evidence['val_rise'])}%) while the training loss fell "
        f"from {fmt(train_at[best_epoch])} to {fmt(final_train)}.",
        **_at(signals, val, best + 1), evidence=evidence,
        suggestion=(f"Stop at epoch {best_epoch} (`keras.callbacks.EarlyStopping("
                    "monitor='val_loss', patience=3, restore_best_weights=True)`), add "
                    "dropout or weight decay, augment or add data, or shrink the model."),
    )]
