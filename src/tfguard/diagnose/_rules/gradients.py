"""Rules `exploding_gradient` and `vanishing_gradient`, from per-layer gradient norms.

AUTOTRAINER (ICSE 2021) compares the gradient norm of the first layer with
the last: vanishing when `first / last < 1e-3` and `first < 1e-4`, exploding
when `first / last > 70`. Its check runs on one batch per epoch; a single
noisy batch can trip it. tfguard reads every logged observation, requires
`persistence` consecutive ones, and adds a scale-free growth test for
explosions: a gradient norm (the global one or a layer's) that reaches
`explode_growth` times its own early median is exploding, whatever the
architecture. That catches a diverging run many steps before its loss turns
NaN and names the layer that grew first. The ratio test of AUTOTRAINER is
kept but only counts while the layer's norm also grew (`explode_growth`
square-rooted), since a large first/last ratio alone is common in healthy
models fed many input features.

Example:

>>> import numpy as np
>>> from tfguard.diagnose import Signals, Thresholds
>>> from tfguard.diagnose._rules.gradients import exploding_gradient
>>> steps = np.arange(1, 31)
>>> s = Signals.from_arrays({"grad_norm/dense": (steps, 1.5 ** steps)})
>>> exploding_gradient(s, Thresholds())[0].where
'dense'
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tfguard import _tags
from tfguard._findings import Finding, fmt
from tfguard.diagnose._inputs.signals import MissingSignals, Series, Signals, death_point, missing
from tfguard.diagnose._rules.base import (
    at_chance,
    baseline,
    first_persistent,
    onset,
    remark_when_improving,
    run_improving,
)
from tfguard.diagnose._rules.initialization import (
    growth_before_death,
    growth_text,
    initialization,
    narrow_initialization,
)
from tfguard.diagnose._thresholds import Thresholds


def _growth_onset(series: Series, thresholds: Thresholds, factor: float):
    base = baseline(series.values, thresholds.baseline_points)
    if base is None:
        return None
    values = series.values
    with np.errstate(all="ignore"):
        grown = np.where(np.isfinite(values), values / base > factor, True)
    start = first_persistent(grown, thresholds.persistence)
    # a run that starts with a NaN is the nonfinite rule's, not an explosion
    while start is not None and not np.isfinite(values[start]):
        nxt = first_persistent(grown[start + 1 :], thresholds.persistence)
        start = None if nxt is None else start + 1 + nxt
    if start is None:
        return None
    return start, base


def exploding_gradient(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports gradient norms that grow by orders of magnitude, or explode from the first step.

    Reads the whole run (a rule with `after_death`): a kernel initializer
    far too wide (`initialization`) comes first, with the growth before the
    run died when it did; else the growth over an early median, on the
    signals before the run died; else the growth before the NaN alone.
    A growth while the run keeps improving (`run_improving`) is an `info`:
    a warning needs evidence that the run is hurt.

    Args:
        signals: the run, with `grad_norm/<layer>` (and/or `grad_norm/global`).
        thresholds: uses `explode_growth`, `explode_ratio`, `baseline_points`,
            `persistence`, `explode_before_nan_growth` and those of `initialization`.

    Returns:
        At most one finding, naming the layer whose norm exploded first.

    Raises:
        MissingSignals: without gradient norms and without a too-wide initializer.
    """
    death = death_point(signals)
    alive = signals.truncated(*death) if death is not None else signals
    growth = growth_before_death(alive, death[0] if death is not None else None, thresholds)
    found = initialization(signals, thresholds, growth)
    if found:
        return found
    found = _growth(signals, thresholds)
    if found and found[0].severity == "warning" and run_improving(signals, thresholds):
        f = found[0]
        found = [dataclasses.replace(
            f, severity="info",
            message=f.message.rstrip(".") + "; the run is not hurt (its losses keep falling), so "
            "this is a remark, not a warning.", evidence={**f.evidence, "run_improving": 1})]
    if found or growth is None:
        return found
    return [Finding(
        "exploding_gradient", "error", growth_text(growth)[0].upper() + growth_text(growth)[1:] + ".",
        where=None if growth["layer"] == "global" else growth["layer"],
        onset_step=growth["from_step"], onset_epoch=signals.epoch_of(growth["from_step"]),
        evidence={"code": "before_nonfinite",
                  **{f"growth_{k}": v for k, v in growth.items() if k != "layer"}},
        suggestion=("Lower the learning rate (try 10x smaller), clip gradients "
                    "(`clipnorm=1.0`), and check the weight initialization."),
    )]


def _growth(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """The growth test over an early median and AUTOTRAINER's ratio (see the module docstring)."""
    layers = signals.per_layer("grad_norm")
    glob = signals.series(_tags.GLOBAL_GRAD_NORM)
    if not layers and glob is None:
        raise MissingSignals(missing(signals, "gradient norms", "grad_norm/<layer>"))

    hits = []
    for name, s in list(layers.items()) + ([("global", glob)] if glob is not None else []):
        found = _growth_onset(s, thresholds, thresholds.explode_growth)
        if found is None:
            continue
        start, base = found
        peak = float(np.nanmax(np.where(np.isfinite(s.values), s.values, np.nan)[start:]))
        step, epoch = s.at(start)
        hits.append((step if step is not None else epoch, name != "global", name, s, start, base, peak))

    # AUTOTRAINER's first/last ratio, while the first layer's norm also grew
    names = list(layers)
    ratio_hit = None
    if len(names) >= 2:
        first, last = layers[names[0]], layers[names[-1]]
        common, i1, i2 = np.intersect1d(first.steps, last.steps, return_indices=True)
        if len(common) and np.all(common >= 0):
            with np.errstate(all="ignore"):
                ratio = first.values[i1] / last.values[i2]
            base = baseline(first.values[i1], thresholds.baseline_points)
            grew = first.values[i1] > (base or np.inf) * math.sqrt(thresholds.explode_growth)
            start = first_persistent(np.isfinite(ratio) & (ratio > thresholds.explode_ratio) & grew,
                                     thresholds.persistence)
            if start is not None:
                ratio_hit = (int(common[start]), names[0], first, int(i1[start]),
                             float(ratio[start]))

    if not hits and ratio_hit is None:
        return []
    if hits:
        # earliest onset, a layer rather than the global norm, then the largest growth
        hits.sort(key=lambda h: (h[0], not h[1], -h[6] / h[5]))
        _, _, name, s, start, base, peak = hits[0]
        where = None if name == "global" else signals.layer_path(name)
        evidence = {"baseline_norm": base, "norm_at_onset": float(s.values[start]),
                    "peak_norm": peak, "growth": peak / base,
                    "layers_exploding": sum(1 for h in hits if h[1])}
        went_nonfinite = bool((~np.isfinite(s.values[start:])).any())
        at = onset(s, start)
        label = f"layer '{where}'" if where else "the global gradient"
        message = (
            f"the gradient norm of {label} grew {fmt(peak / base)}x over its early median "
            f"{fmt(base)} (to {fmt(peak)}), starting at "
            + (f"step {at['onset_step']}" if at["onset_step"] is not None else f"epoch {at['onset_epoch']}")
            + (" and then became non-finite." if went_nonfinite else ".")
        )
    else:
        step, name, s, start, ratio = ratio_hit
        where, went_nonfinite = signals.layer_path(name), False
        evidence = {"first_last_ratio": ratio, "norm_at_onset": float(s.values[start])}
        at = onset(s, start)
        message = (f"the gradient norm of the first layer '{where}' is {fmt(ratio)}x the last "
                   f"layer's (above {fmt(thresholds.explode_ratio)}) from step {step}.")
    if at["onset_epoch"] is None:
        at["onset_epoch"] = signals.epoch_of(at["onset_step"])
    return [Finding(
        "exploding_gradient", "error" if went_nonfinite else "warning", message,
        where=where, evidence=evidence, **at,
        suggestion=("Lower the learning rate (try 10x smaller), clip gradients "
                    "(`optimizer=keras.optimizers.Adam(clipnorm=1.0)`), normalize inputs and "
                    "targets, and check the weight initialization of "
                    + (f"'{where}'." if where else "the model.")),
    )]


def _dead_layer(signals: Signals, thresholds: Thresholds, onset_step: int | None,
                first: str) -> tuple[str, int] | None:
    """`(layer, step it died)` of `first` or a layer above it dead as a whole no later than the
    gradients vanished (`onset_step`), else `None`."""
    order = signals.layer_order()
    for name, s in signals.per_layer("dead_fraction").items():
        if name in order and first in order and order.index(name) < order.index(first):
            continue  # a dead layer blocks the gradient of its own weights and the layers below it
        mask = np.isfinite(s.values) & (s.values >= thresholds.dead_error_fraction)
        start = first_persistent(mask, thresholds.persistence)
        if start is None:
            continue
        died = int(s.steps[start])
        if onset_step is None or died <= onset_step:
            return name, died
    return None


def vanishing_gradient(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports gradients of the first layers that vanish compared with the last.

    AUTOTRAINER: `first / last < vanish_ratio` and `first < vanish_first_norm`,
    here for `persistence` consecutive observations. The absolute bound keeps a
    small first layer of a run that learns from being flagged; a gradient norm's
    size depends on the layer's size and the loss's scale, so a run at chance
    (`at_chance`: the run learnt nothing) needs the ratio alone (a deep sigmoid
    LeNet at accuracy 0.10: the first convolution's norm 7e-4, 1/1800 of the
    last layer's).

    Args:
        signals: the run, with `grad_norm/<layer>` of at least two layers.
        thresholds: uses `vanish_ratio`, `vanish_first_norm`, `persistence`.

    Returns:
        At most one finding, naming the first layer (an info, not a warning,
        when a dead ReLU layer explains it).

    Raises:
        MissingSignals: without per-layer gradient norms of two layers and
            without initializers far too narrow.
    """
    narrow = narrow_initialization(signals, thresholds)
    try:
        measured = _vanishing(signals, thresholds, explained_by_init=bool(narrow))
    except MissingSignals:
        if narrow:
            return narrow
        raise
    if not narrow:
        return measured
    if not measured or measured[0].severity == "info":
        return narrow  # a remark until training shows what it produces (tfguard.diagnose._causes)
    # the initializers are the cause of the vanishing the norms show: one finding says both
    f, cause = measured[0], narrow[0]
    return [dataclasses.replace(
        cause, severity=f.severity, onset_step=f.onset_step, onset_epoch=f.onset_epoch,
        message=f"{cause.message[:-1]}; measured: {f.message[0].lower()}{f.message[1:]}",
        evidence={**{k: v for k, v in cause.evidence.items() if k != "needs_symptom"}, **f.evidence,
                  "code": "initialization"})]


def _vanishing(signals: Signals, thresholds: Thresholds, explained_by_init: bool) -> list[Finding]:
    """`vanishing_gradient` from the gradient norms alone (a dead layer that died no later
    explains it, unless the initializers explain both)."""
    layers = signals.per_layer("grad_norm")
    if not layers:
        raise MissingSignals(missing(signals, "gradient norms", "grad_norm/<layer>"))
    if len(layers) < 2:
        raise MissingSignals("gradient norms of only one layer; the rule compares first and last")
    names = list(layers)
    first, last = layers[names[0]], layers[names[-1]]
    common, i1, i2 = np.intersect1d(first.steps, last.steps, return_indices=True)
    if not len(common):
        raise MissingSignals("the first and last layers' gradient norms share no step")
    f, lv = first.values[i1], last.values[i2]
    with np.errstate(all="ignore"):
        ratio = f / lv
    ok = np.isfinite(ratio) & (lv > 1e-12)
    chance = at_chance(signals, thresholds)
    small = np.ones_like(ok) if chance is not None else f < thresholds.vanish_first_norm
    mask = ok & (ratio < thresholds.vanish_ratio) & small
    start = first_persistent(mask, thresholds.persistence)
    if start is None:
        return []
    at = onset(first, int(i1[start]))
    if at["onset_epoch"] is None:
        at["onset_epoch"] = signals.epoch_of(at["onset_step"])
    tail = slice(start, None)
    last_med = float(np.median(lv[tail][ok[tail]]))
    # the layers whose norm stayed below vanish_ratio of the last layer's from the onset on
    # (the first layer, which the ratio test found, always among them)
    vanished = [names[0]] + [n for n in names[1:-1]
                             if np.nanmedian(layers[n].values[layers[n].steps >= common[start]])
                             < thresholds.vanish_ratio * last_med]
    evidence = {
        "first_last_ratio": float(np.median(ratio[tail][ok[tail]])),
        "first_norm": float(np.median(f[tail][ok[tail]])),
        "last_norm": last_med,
        "layers_vanished": len(vanished),
        "layers": len(names),
    }
    message = (
        f"the gradient norm of the first layer '{names[0]}' is {fmt(evidence['first_last_ratio'])}x "
        f"the last layer's '{names[-1]}' ({fmt(evidence['first_norm'])} vs {fmt(last_med)}); "
        f"{len(vanished)} of {len(names)} layers barely learn."
    )
    if chance is not None and evidence["first_norm"] >= thresholds.vanish_first_norm:
        evidence.update({f"chance_{k}": v for k, v in chance.items()})
        message += (" The run is at chance" + (
            f" (best accuracy {fmt(chance['best_accuracy'])} against {fmt(chance['chance_accuracy'])})"
            if "best_accuracy" in chance else
            f" (best loss {fmt(chance['best_loss'])} against {fmt(chance['chance_loss'])})") + ".")
    severity = "warning"
    dead = None if explained_by_init else _dead_layer(signals, thresholds, at["onset_step"],
                                                      names[0])
    if dead is not None:
        # a ReLU layer dead before the gradients vanished blocks every gradient below it: that is
        # the cause (one that died later, after the vanishing, is not)
        severity = "info"
        evidence["dead_layer_onset_step"] = dead[1]
        message += f" Explained by the layer '{dead[0]}', dead from step {dead[1]} (see dead_relu)."
    return remark_when_improving([Finding(
        "vanishing_gradient", severity, message, where=signals.layer_path(names[0]),
        evidence=evidence, **at,
        suggestion=("Use ReLU-family activations in hidden layers (sigmoid/tanh shrink "
                    "gradients at every layer), He initialization, BatchNormalization, or "
                    "residual connections; make the network shallower."),
    )], signals, thresholds)
