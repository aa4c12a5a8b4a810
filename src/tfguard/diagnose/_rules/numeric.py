"""Rule `nonfinite`: a loss, gradient norm or weight norm became NaN or Inf.

AUTOTRAINER (ICSE 2021) reports NaN loss, weights or gradients as the
terminal stage of an exploding training; TheDeepChecker checks the loss and
the parameters stay finite. tfguard reports the first step at which any
logged loss, metric, gradient norm, weight norm or update ratio is not
finite, and names the layer whose gradient (else weights) went first. A run
guarded by the firewall may keep finite curves because the bad updates were
skipped: then the guard's own event lines (`guard/events`) that mention NaN
or Inf give a warning instead. When only validation metrics (`val/*`) went
non-finite and the training loss stayed finite, the finding says the
validation data holds NaN/Inf (`where="validation data"`), with a remedy in
that data, not in the learning rate.

Example:

>>> from tfguard.diagnose import Signals, Thresholds
>>> from tfguard.diagnose._rules.numeric import nonfinite
>>> s = Signals.from_arrays({"train/loss": ([1, 2, 3], [1.0, float("nan"), float("nan")])})
>>> [f.onset_step for f in nonfinite(s, Thresholds())]
[2]
"""

from __future__ import annotations

import re

import numpy as np

from tfguard import _tags
from tfguard._findings import Finding, fmt
from tfguard.diagnose._inputs.signals import MissingSignals, Series, Signals
from tfguard.diagnose._rules.firewall import stage_finding
from tfguard.diagnose._thresholds import Thresholds

_GUARDED_SUGGESTION = (
    "Lower the learning rate or clip gradients (e.g. `clipnorm=1.0`), compute the loss "
    "from logits (`from_logits=True`) instead of log(softmax), and check the input batch for "
    "NaN/Inf."
)
_SUGGESTION = (_GUARDED_SUGGESTION[:-1] + "; run under `tfguard.guard(model)` to stop at the first bad "
               "step with the batch quarantined.")


def _first_bad(series: Series, rejected: frozenset = frozenset()) -> int | None:
    """The first non-finite point, leaving out those logged at a step the firewall rejected."""
    bad = ~np.isfinite(series.values)
    if rejected:
        bad &= ~np.isin(series.steps, list(rejected))
    return int(np.argmax(bad)) if bad.any() else None


def rejected_steps(signals: Signals) -> frozenset:
    """The global steps whose update the firewall did not apply: what was logged there is the rejected step's."""
    return frozenset(int(e["step"]) for e in signals.guard_events
                     if e.get("action") in ("skipped", "raised") and e.get("step") is not None)


def _order_key(series: Series, index: int) -> tuple[int, int]:
    step, epoch = series.at(index)
    return (step if step is not None else 2**62, epoch if epoch is not None else 2**62)


def nonfinite(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports the first non-finite loss, metric, gradient or weight.

    Args:
        signals: the run.
        thresholds: unused (a NaN needs no threshold).

    Returns:
        At most one `nonfinite` finding (error), or a warning from the guard's events.

    Raises:
        MissingSignals: when neither a loss nor a gradient or weight norm was logged.
    """
    del thresholds
    watched: dict[str, Series] = {}
    for tag, s in signals.scalars.items():
        if not len(s):
            continue
        if tag.startswith((_tags.TRAIN, _tags.VAL, _tags.BATCH, _tags.GRAD_NORM, _tags.WEIGHT_NORM,
                           _tags.UPDATE_RATIO)) and tag != _tags.EPOCH:
            watched[tag] = s
    if not watched and signals.guard_events:
        return _from_guard(signals)  # train_on_batch or a loop: only the firewall saw the steps
    if not watched:
        raise MissingSignals("no loss, metric, gradient norm or weight norm was logged")

    rejected = rejected_steps(signals)
    bad = {tag: i for tag, s in watched.items() if (i := _first_bad(s, rejected)) is not None}
    if not bad:
        return _from_guard(signals)

    if all(tag.startswith(_tags.VAL) for tag in bad):
        only_validation = _validation_only(signals, watched, bad)
        if only_validation is not None:
            return [only_validation]
    first_tag = min(bad, key=lambda t: _order_key(watched[t], bad[t]))
    series = watched[first_tag]
    index = bad[first_tag]
    step, epoch = series.at(index)

    where = None
    for kind in ("grad_norm", "weight_norm"):
        layers = signals.per_layer(kind)
        hits = {
            name: _order_key(s, i) for name, s in layers.items()
            if (i := _first_bad(s, rejected)) is not None
        }
        if not hits:
            continue
        earliest = min(hits.values())
        firsts = [name for name, key in hits.items() if key == earliest]
        if len(firsts) < len(layers):
            where = firsts[0]
        break

    finite_before = series.values[:index][np.isfinite(series.values[:index])]
    evidence = {
        "nonfinite_points": int(sum(int((~np.isfinite(watched[t].values)).sum()) for t in bad)),
        "tags_affected": len(bad),
        "first_value": float(series.values[index]),
    }
    if len(finite_before):
        evidence["last_finite_value"] = float(finite_before[-1])
    value = series.values[index]
    what = "NaN" if np.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    at = f"step {step}" if step is not None else f"epoch {epoch}"
    place = f" first in layer '{where}'" if where else ""
    message = f"'{first_tag}' became {what} at {at}{place}; {len(bad)} logged signal(s) are non-finite."
    if epoch is None and step is not None:
        epoch = signals.epoch_of(step)
    guarded = bool(signals.guard_events) or signals.series(_tags.GUARD_SKIPPED) is not None
    return [Finding("nonfinite", "error", message, onset_step=step, onset_epoch=epoch,
                    where=where, evidence=evidence, suggestion=_GUARDED_SUGGESTION if guarded else _SUGGESTION)]


_VALIDATION_SUGGESTION = (
    "The training is not at fault: do not lower the learning rate for this. Check the "
    "validation set for NaN/Inf (`np.isnan(x_val).sum()`, `np.isinf(x_val).sum()`) and its "
    "labels against the loss's range, then drop or impute the bad rows, or preprocess the "
    "validation data exactly as the training data. The firewall guards training batches "
    "only, so it skipped nothing."
)


def _validation_only(signals: Signals, watched: dict, bad: dict) -> Finding | None:
    """Only validation metrics went non-finite while the training loss stayed finite.

    Then the validation data holds NaN/Inf (or values the training data
    never had), and the remedy is in that data, not in the optimizer.
    Returns `None` when no training loss was logged to tell.
    """
    losses = [s for tag in (_tags.train("loss"), _tags.batch("loss"))
              if (s := watched.get(tag)) is not None]
    if not losses or not all(np.isfinite(s.values).all() for s in losses):
        return None
    first_tag = min(bad, key=lambda t: _order_key(watched[t], bad[t]))
    series, index = watched[first_tag], bad[first_tag]
    step, epoch = series.at(index)
    value = series.values[index]
    what = "NaN" if np.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    at = f"step {step}" if step is not None else f"epoch {epoch}"
    train_loss = float(losses[0].values[-1])
    message = (f"'{first_tag}' became {what} at {at} while the training loss stayed finite "
               f"(last {fmt(train_loss)}): the validation data holds NaN or Inf, not the "
               f"training; {len(bad)} validation signal(s) are non-finite.")
    evidence = {"validation_only": True, "tags_affected": len(bad),
                "nonfinite_points": int(sum(int((~np.isfinite(watched[t].values)).sum())
                                            for t in bad)),
                "train_loss_last": train_loss}
    if epoch is None and step is not None:
        epoch = signals.epoch_of(step)
    return Finding("nonfinite", "error", message, onset_step=step, onset_epoch=epoch,
                   where="validation data", evidence=evidence, suggestion=_VALIDATION_SUGGESTION)


_NONFINITE_TEXT = re.compile(r"\b(nan|inf|non-finite|nonfinite)\b", re.IGNORECASE)


_OUTSIDE_FIT_SUGGESTION = (
    "Find the step that makes them: guard the loop's step with `tfguard.guard_step(step_fn, "
    "model)` (it quarantines the batch and names the first non-finite layer on replay), or check "
    "each batch before it trains (`np.isfinite(x).all()`, and the labels against the loss's range)."
)


def _outside_fit(events: list[dict]) -> Finding:
    """The updates the firewall's gate rejected outside any `fit` (`stage == "outside_fit"`):
    `train_on_batch` or a hand-written loop under `tfguard run`, counted per optimizer."""
    updates = int(sum(e.get("counts", {}).get("updates", 1) for e in events))
    where = ", ".join(dict.fromkeys(f"'{e.get('where')}'" for e in events if e.get("where")))
    return Finding(
        "nonfinite", "warning",
        f"the firewall rejected {updates} update(s) of optimizer {where or '(unnamed)'} made outside "
        "fit (train_on_batch or a hand-written loop): each had a non-finite gradient or result, and "
        "the weights were kept as they were, so the training went on without those steps.",
        where=where.strip("'") or None, evidence={"rejected_updates": updates, "code": "outside_fit"},
        suggestion=_OUTSIDE_FIT_SUGGESTION)


def _from_guard(signals: Signals) -> list[Finding]:
    outside = [e for e in signals.guard_events if e.get("stage") == "outside_fit"]
    if outside:
        return [_outside_fit(outside)]
    if signals.guard_events:  # a data check's violation is the record's (`bad_record`, `label_range`)
        staged = [e for e in signals.guard_events if e.get("check") == "finite"
                  and e.get("stage") in ("forward", "loss", "gradients", "update")]
        return [stage_finding(signals, staged)] if staged else []
    # logs written before the structured records: the event lines
    lines = [(step, text) for step, text in signals.texts.get(_tags.GUARD_EVENTS, [])
             if _NONFINITE_TEXT.search(text or "")]
    if not lines:
        return []
    skipped = signals.series(_tags.GUARD_SKIPPED)
    evidence = {"guard_events": len(lines)}
    if skipped is not None:
        evidence["skipped_updates"] = float(np.nanmax(skipped.values))
    step = int(lines[0][0]) if lines[0][0] is not None else None
    message = (
        f"the firewall caught {len(lines)} non-finite event(s), the first at step {step}; "
        "the logged curves stayed finite because the bad updates were not applied."
    )
    return [Finding("nonfinite", "warning", message, onset_step=step,
                    onset_epoch=signals.epoch_of(step), evidence=evidence,
                    suggestion=_GUARDED_SUGGESTION)]
