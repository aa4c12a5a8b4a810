"""Rule `learning_rate`: a learning rate far too high (the loss jumps) or far too low (nothing moves).

A diverging run is usually reported by its consequences: a NaN loss, dead
ReLUs, no learning. The cause is often one number. tfguard names it when
the evidence is direct:

- *too high*: the training loss rises to `lr_jump` times its first value
  within the first epoch (at a batch size below `lr_jump_min_batch`, the
  median of its first `baseline_points` values: the loss of one example is
  one draw of a wide spread, not the model's), or turns non-finite there
  after climbing (to `sqrt(lr_jump)` times its first value: a NaN out of
  nowhere is bad data or a log(0), not a step size); or the per-step
  update of some layer is larger than `update_ratio_max` of its weights
  (TheDeepChecker's bound, 1e-1) for `persistence` observations in a row; or
  the run died within its first epoch right after an update at least
  `update_ratio_fatal` times a layer's weights (a run NaN from step 2 leaves
  one observation, too few for persistence: a loss summed over a batch of 205
  under SGD(0.01) moved its weights by 4.8x their norm in one step);
- *too low*: in every layer the median update is below `update_ratio_min`
  of the weights while the training loss does not decrease.

The message names the optimizer and its learning rate, read from the model
description or the logged `optimizer/learning_rate`; `evidence["far_above_default"]`
says the rate (as a step size) is `lr_default_factor` times its optimizer's
Keras default or more, which `tfguard.diagnose._causes` weighs against the
inputs' scale.

Example:

>>> import numpy as np
>>> from tfguard.diagnose import Signals, Thresholds
>>> steps = np.arange(1, 9)
>>> s = Signals.from_arrays({"batch/loss": (steps, [2.3, 2.5, 9.0, 80.0, 900.0, 1e4, np.nan, np.nan]),
...                          "train/loss": ([8], [np.nan])},
...                         model={"optimizer": {"class": "SGD", "learning_rate": 0.5}})
>>> f = learning_rate(s, Thresholds())[0]
>>> f.severity, f.evidence["direction"], "SGD's learning rate is 0.5" in f.message
('error', 'high', True)
"""

from __future__ import annotations

import contextlib

import numpy as np

from tfguard import _tags
from tfguard._findings import Finding, fmt
from tfguard.diagnose._inputs.signals import MissingSignals, Series, Signals, death_point
from tfguard.diagnose._rules.base import first_persistent
from tfguard.diagnose._thresholds import Thresholds

#: Keras's default learning rate of each optimizer class (keras.optimizers, 3.x).
KERAS_DEFAULT_RATES = {"SGD": 0.01, "Adam": 0.001, "AdamW": 0.001, "RMSprop": 0.001,
                       "Nadam": 0.001, "Adamax": 0.001, "Adagrad": 0.001, "Adadelta": 0.001,
                       "Adafactor": 0.001, "Ftrl": 0.001, "Lion": 0.001, "Lamb": 0.001,
                       "Muon": 0.001}


WEIGHTLESS_LOSS = 1e-9
"""A logged loss at or below this at the start of training is a batch without weight, not a loss."""


def optimizer_text(signals: Signals) -> tuple[str, float | None, str | None]:
    """`("SGD's learning rate is 0.05", 0.05, "SGD")`, from the model description or the logged rate."""
    described = (signals.model or {}).get("optimizer") or {}
    name = described.get("class")
    rate = described.get("learning_rate")
    logged = signals.series(_tags.LEARNING_RATE)
    if rate is None and logged is not None and len(logged):
        rate = float(logged.values[0])
    if rate is None:
        for key in ("learning_rate", "lr"):
            if key in signals.hparams:
                with contextlib.suppress(TypeError, ValueError):
                    rate = float(signals.hparams[key])
    owner = f"{name}'s learning rate" if name else "the learning rate"
    return (f"{owner} is {fmt(rate)}" if rate is not None else owner), rate, name


def _loss_series(signals: Signals) -> tuple[str, Series] | None:
    for tag in (_tags.batch("loss"), _tags.train("loss")):
        s = signals.series(tag)
        if s is not None and len(s):
            return tag, s
    return None


def _divergence(signals: Signals, thresholds: Thresholds):
    """`(index, series, first, peak, reference)` where the loss jumped within the first epoch, or
    `None`; `reference` is what the jump was measured from (the first loss, or at a tiny batch
    size the median of the first ones)."""
    found = _loss_series(signals)
    if found is None:
        return None
    tag, s = found
    first_epoch_end = signals.step_of_epoch(0)
    if s.has_steps and first_epoch_end is not None:
        window = np.flatnonzero((s.steps >= 0) & (s.steps <= first_epoch_end))
    elif tag == _tags.train("loss"):
        window = np.arange(0)  # one point per epoch: no jump within the first epoch to see
    else:
        window = np.arange(len(s))
    if len(window) < 2:
        return None
    values = s.values[window]
    finite = np.isfinite(values)
    if not finite[0]:
        return None  # broken from the first step: the data or the model, not the step size
    # a first loss of (nearly) 0 is a batch that carried no weight (all-zero sample weights), not a
    # measured loss: the reference is the first loss a batch with weight gave
    start = int(np.argmax(~finite | (np.abs(values) > WEIGHTLESS_LOSS)))
    if start:
        window, values, finite = window[start:], values[start:], finite[start:]
        if len(window) < 2 or not finite[0]:
            return None
    first = float(abs(values[0])) or 1e-12
    reference = first
    batch = signals.hparams.get("batch_size")
    if isinstance(batch, (int, float)) and 0 < batch < thresholds.lr_jump_min_batch:
        # a batch of one or a few examples: its loss is one draw from the examples' spread (at
        # batch size 1 a first loss of 0.41 then 3.6 for the next example, under Adam's default)
        early = np.abs(values[finite][: thresholds.baseline_points])
        reference = max(float(np.median(early)), first)
    with np.errstate(all="ignore"):
        jumped = ~finite | (np.abs(values) > thresholds.lr_jump * reference)
    jumped[0] = False
    hits = np.flatnonzero(jumped)
    if not len(hits):
        return None
    if not finite[hits[0]]:
        # a NaN out of nowhere is bad data or a log(0), not a step size: the loss must have
        # been climbing first (a rate too high makes it grow for a few steps, then overflow)
        before = np.abs(values[: hits[0]][finite[: hits[0]]])
        if not len(before) or before.max() < np.sqrt(thresholds.lr_jump) * first:
            return None
    peak = float(np.nanmax(np.abs(np.where(finite, values, np.nan)))) if finite.any() else first
    return int(window[hits[0]]), s, first, peak, reference


def _update_ratios(signals: Signals) -> dict[str, Series]:
    return signals.per_layer("update_ratio")


def learning_rate(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports a learning rate far too high or far too low (see the module docstring).

    Returns:
        At most one finding: an error when the loss diverged, else a warning.

    Raises:
        MissingSignals: without a loss curve and without update ratios.
    """
    ratios = _update_ratios(signals)
    if _loss_series(signals) is None and not ratios:
        raise MissingSignals("no loss curve and no update ratios (update_ratio/<layer>)")
    owner, rate, name = optimizer_text(signals)
    evidence: dict = {"learning_rate": rate if rate is not None else float("nan")}
    if name:
        evidence["optimizer"] = name
    default, step_size = KERAS_DEFAULT_RATES.get(name or ""), effective_rate(signals, rate, name)
    if default and step_size is not None and step_size > thresholds.lr_default_factor * default:
        evidence["far_above_default"] = 1  # the rate itself is far outside its usual range
    diverged = _divergence(signals, thresholds)
    if diverged is not None:
        index, s, first, peak, reference = diverged
        step, epoch = s.at(index)
        value = float(s.values[index])
        since = ("its first value" if reference == first else
                 f"the median of its first {thresholds.baseline_points} values")
        what = ("became non-finite" if not np.isfinite(value)
                else f"rose to {fmt(value)}, {fmt(abs(value) / reference)}x {since}")
        evidence.update(direction="high", first_loss=first, peak_loss=peak, code="loss_jump")
        if reference != first:
            evidence["reference_loss"] = reference
        return [Finding(
            "learning_rate", "error",
            f"the training loss {what} within the first epoch (from {fmt(reference)}): {owner}, "
            "far too high for this model and data.",
            onset_step=step, onset_epoch=epoch if epoch is not None else 0, evidence=evidence,
            suggestion=("Lower the learning rate (try 10x smaller), or add gradient clipping "
                        "(`clipnorm=1.0`) while you look for the right rate."),
        )]
    big = []
    for layer, s in ratios.items():
        finite = np.isfinite(s.values)
        start = first_persistent(finite & (s.values > thresholds.update_ratio_max),
                                 thresholds.persistence)
        if start is not None and np.median(s.values[finite]) > thresholds.update_ratio_max:
            big.append((layer, s, start, float(np.median(s.values[finite]))))
    if big:
        layer, s, start, median = max(big, key=lambda b: b[3])
        step, epoch = s.at(start)
        evidence.update(direction="high", median_update_ratio=median, layer=layer,
                        code="update_ratio")
        return [Finding(
            "learning_rate", "warning",
            f"each step changes layer '{layer}' by {fmt(100 * median)}% of its weights "
            f"(median update/weight ratio {fmt(median)} > {fmt(thresholds.update_ratio_max)}): "
            f"{owner}, too high.",
            where=layer, onset_step=step, onset_epoch=epoch, evidence=evidence,
            suggestion="Lower the learning rate until updates are about 1e-3 of the weights.",
        )]
    fatal = _fatal_update(signals, ratios, thresholds)
    if fatal is not None:
        layer, s, index, death_step = fatal
        ratio = float(s.values[index])
        step, epoch = s.at(index)
        evidence.update(direction="high", update_ratio=ratio, layer=layer, nonfinite_step=death_step,
                        code="fatal_update")
        return [Finding(
            "learning_rate", "error",
            f"the update of step {step} changed layer '{layer}' by {fmt(100 * ratio)}% of its "
            f"weights (update/weight ratio {fmt(ratio)}) and the run turned non-finite at step "
            f"{death_step}: {owner}, far too high for this model and data.",
            where=layer, onset_step=step, onset_epoch=epoch if epoch is not None else 0,
            evidence=evidence,
            suggestion=("Lower the learning rate (try 10x smaller), or add gradient clipping "
                        "(`clipnorm=1.0`); a loss summed over the batch instead of averaged makes "
                        "every step batch-size times larger."),
        )]
    default = KERAS_DEFAULT_RATES.get(name or "")
    step = effective_rate(signals, rate, name)
    if step is not None and default and step > thresholds.lr_default_factor * default:
        # a suspect, not a verdict: `by_cause` makes it a warning when a symptom it explains shows
        evidence.update(direction="high", default_rate=default, times_default=rate / default,
                        times_default_step=step / default, code="far_above_default",
                        needs_symptom=1, effective_rate=step)
        momentum = ((signals.model or {}).get("optimizer") or {}).get("momentum") or 0.0
        batch = signals.hparams.get("batch_size")
        how = ""
        if step != rate:  # each factor says what it compares: the rate, then the step it makes
            how = (f"; with momentum {fmt(momentum)} a steady gradient moves it {fmt(step)} a step"
                   + (f" (per example, at batch size {batch})" if batch == 1 else "")
                   + f", {fmt(step / default)}x the step of that default (no momentum)")
        return [Finding(
            "learning_rate", "info",
            f"{owner}, {fmt(rate / default)}x Keras's default for {name} ({fmt(default)}){how}.",
            onset_step=0, onset_epoch=0, evidence=evidence,
            suggestion=f"Try {name}'s default learning rate ({fmt(default)}), then tune from there.",
        )]
    return _too_low(signals, thresholds, ratios, owner, evidence)


def _fatal_update(signals: Signals, ratios: dict[str, Series], thresholds: Thresholds):
    """`(layer, series, index, death_step)` of an update of `update_ratio_fatal` times a layer's
    weights that came right before the run died in its first epoch, or `None`.

    Right before: it is the layer's last finite observation up to the death, and fewer than
    `persistence` observations precede it (a longer run of large updates is the persistent
    test's). A NaN out of a normal-sized update (bad data, a log(0)) is not a step size.
    """
    death = death_point(signals)
    first_epoch_end = signals.step_of_epoch(0)
    if death is None or death[0] is None or (first_epoch_end is not None and death[0] > first_epoch_end):
        return None
    hits = []
    for layer, s in ratios.items():
        if not s.has_steps:
            continue
        before = np.flatnonzero((s.steps <= death[0]) & np.isfinite(s.values) & (s.values >= 0))
        if not len(before) or len(before) > thresholds.persistence:
            continue
        index = int(before[-1])
        if s.values[index] >= thresholds.update_ratio_fatal:
            hits.append((float(s.values[index]), layer, s, index))
    if not hits:
        return None
    _, layer, s, index = max(hits, key=lambda h: h[0])
    return layer, s, index, death[0]


def effective_rate(signals: Signals, rate: float | None, name: str | None) -> float | None:
    """The learning rate as a step size: SGD with momentum `m` moves `rate / (1 - m)` per step.

    Heavy-ball momentum sums past steps: at a steady gradient it moves
    `1 / (1 - m)` times the plain step (10x for `momentum=0.9`), so an SGD
    rate is compared with its default through this (Goodfellow et al.,
    "Deep Learning", 8.3.2). Other optimizers keep `rate`.

    Example:

    >>> s = Signals(model={"optimizer": {"class": "SGD", "learning_rate": 0.05, "momentum": 0.9}})
    >>> round(effective_rate(s, 0.05, "SGD"), 3)
    0.5
    """
    if rate is None:
        return None
    momentum = ((signals.model or {}).get("optimizer") or {}).get("momentum")
    if name == "SGD" and isinstance(momentum, (int, float)) and 0 < momentum < 1:
        return rate / (1.0 - momentum)
    return rate


def _too_low(signals, thresholds, ratios, owner, evidence) -> list[Finding]:
    if not ratios:
        return []
    medians = {}
    for layer, s in ratios.items():
        finite = s.values[np.isfinite(s.values)]
        if len(finite) >= thresholds.persistence:
            medians[layer] = float(np.median(finite))
    if not medians or max(medians.values()) >= thresholds.update_ratio_min:
        return []
    loss = signals.series(_tags.train("loss"))
    if loss is None or len(loss) < 2 or not np.isfinite(loss.values).all():
        return []
    drop = 1 - float(loss.values.min()) / max(float(loss.values[0]), 1e-12)
    if drop > thresholds.nl_min_drop:
        return []
    evidence.update(direction="low", max_median_update_ratio=max(medians.values()), code="tiny_updates",
                    loss_relative_drop=drop)
    return [Finding(
        "learning_rate", "warning",
        f"every step changes the weights by less than {fmt(thresholds.update_ratio_min)} of their "
        f"size and the loss does not fall: {owner}, far too low.",
        onset_step=0, onset_epoch=0, evidence=evidence,
        suggestion="Raise the learning rate (Adam's default 1e-3 is a good start).",
    )]


__all__ = ["effective_rate", "learning_rate", "optimizer_text"]
