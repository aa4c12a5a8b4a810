"""Rules on the data fed to the model: `unnormalized_input`, `label_range`, `pipeline_order`.

They read the per-batch statistics tfguard's logger writes (`data/input_*`
of the first input, `data/label_min` and `data/label_max`), the model
description, and the findings of the static pipeline check (`signals.lint`,
from the text tag `config/lint` or passed in by the caller).

- `unnormalized_input`: TheDeepChecker checks inputs are normalized before
  training; tfguard compares the median per-batch standard deviation and
  absolute mean with `input_std_max` and `input_mean_max`, and stays quiet
  when the model normalizes its input itself (a `Rescaling` or
  `Normalization` layer first). Values tens of times the input's own scale
  in the in-memory `x` (`tfguard.lint._outliers`: a feature almost always 0,
  standardized) are a suspect cause in a run that did not improve.
- `label_range`: labels must lie where the loss and the output can reach:
  class ids in `[0, K-1]` for sparse categorical cross-entropy over K units,
  `[0, 1]` for (binary) cross-entropy, the output activation's range for a
  regression (a sigmoid never reaches 5). One batch out of range is enough:
  it is a fact, not a trend.
- `pipeline_order`: reports the static finding, and detects its runtime
  footprint: batches that each hold a single class although the run has
  several, i.e. sorted data batched without a shuffle before `batch()`.

Example:

>>> from tfguard.diagnose import Signals, Thresholds
>>> from tfguard.diagnose._rules.data import unnormalized_input
>>> s = Signals.from_arrays({"data/input_std": ([1, 2, 3], [90.0, 88.0, 91.0]),
...                          "data/input_mean": ([1, 2, 3], [120.0, 118.0, 121.0])})
>>> unnormalized_input(s, Thresholds())[0].id
'unnormalized_input'
"""

from __future__ import annotations

import numpy as np

from tfguard import _tags
from tfguard._findings import Finding, fmt
from tfguard._losses import resolved_kind
from tfguard.diagnose._inputs.signals import MissingSignals, Signals, missing
from tfguard.diagnose._rules.base import loss_kind, output_activation, output_units, run_improving
from tfguard.diagnose._thresholds import Thresholds

#: Output activation -> the closed range of values it can produce.
ACTIVATION_RANGE = {
    "sigmoid": (0.0, 1.0), "softmax": (0.0, 1.0), "hard_sigmoid": (0.0, 1.0),
    "tanh": (-1.0, 1.0), "softsign": (-1.0, 1.0),
    "relu": (0.0, np.inf), "softplus": (0.0, np.inf), "exponential": (0.0, np.inf),
    "relu6": (0.0, 6.0),
}


def _at(signals: Signals, step: int | None, epoch: int | None = None) -> dict:
    return {"onset_step": step,
            "onset_epoch": epoch if epoch is not None else signals.epoch_of(step)}


def unnormalized_input(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports input features far from a normalized scale.

    Args:
        signals: the run, with `data/input_std` and/or `data/input_mean`.
        thresholds: uses `input_std_max`, `input_mean_max`.

    Returns:
        At most one finding (warning).

    Raises:
        MissingSignals: without input statistics.
    """
    outliers = _extreme_outliers(signals, thresholds)
    try:
        return _batch_scale(signals, thresholds) + outliers
    except MissingSignals:
        if outliers:
            return outliers
        raise


def _extreme_outliers(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """The static finding `extreme_outliers` (`tfguard.lint._outliers`) of a run training showed hurt.

    Heavy-tailed features are often harmless: in a run whose losses keep
    falling (`run_improving`) the evidence makes no finding. Otherwise it is
    a suspect cause (`info`, `evidence["needs_symptom"]`) that becomes a
    warning when a symptom it produces was found (`tfguard.diagnose._causes`).
    """
    items = [item.to_dict() if hasattr(item, "to_dict") else item for item in signals.lint]
    found = [item for item in items if isinstance(item, dict) and item.get("id") == "unnormalized_input"
             and (item.get("evidence") or {}).get("code") == "extreme_outliers"]
    if not found or run_improving(signals, thresholds):
        return []
    item = found[0]
    evidence = {k: v for k, v in (item.get("evidence") or {}).items() if isinstance(v, (int, float, str))}
    return [Finding(
        "unnormalized_input", "info",
        f"extreme input values: {item.get('message', '')} A few rows far outside the input's scale "
        "dominate the first layer's output and gradient for those rows (through an `exp` or a "
        "softplus they overflow); the run did not improve steadily.",
        where=item.get("where"), onset_step=0, onset_epoch=0,
        evidence={**evidence, "needs_symptom": 1}, suggestion=item.get("suggestion"),
    )]


def _batch_scale(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """`unnormalized_input` from the per-batch input statistics."""
    std = signals.series(_tags.INPUT_STD)
    mean = signals.series(_tags.INPUT_MEAN)
    if std is None and mean is None:
        raise MissingSignals(missing(signals, "batch statistics", "data/input_*, data/label_*"))
    if signals.normalizes_input():
        return []
    evidence, reasons, first = {}, [], []
    for name, s, limit in (("std", std, thresholds.input_std_max),
                           ("mean", mean, thresholds.input_mean_max)):
        if s is None:
            continue
        values = np.abs(s.values[np.isfinite(s.values)])
        if not len(values):
            continue
        median = float(np.median(values))
        evidence[f"median_abs_{name}" if name == "mean" else "median_std"] = median
        if median > limit:
            reasons.append(f"{'|mean|' if name == 'mean' else 'std'} {fmt(median)} > {fmt(limit)}")
            idx = int(np.argmax(np.abs(s.values) > limit))
            first.append(s.at(idx))
    if not reasons:
        return []
    lo, hi = signals.series(_tags.INPUT_MIN), signals.series(_tags.INPUT_MAX)
    if lo is not None and hi is not None:
        evidence["min"], evidence["max"] = float(np.nanmin(lo.values)), float(np.nanmax(hi.values))
    step, epoch = min(first, key=lambda p: (p[0] if p[0] is not None else 2**62))
    span = f" (values in [{fmt(evidence['min'])}, {fmt(evidence['max'])}])" if "min" in evidence else ""
    return [Finding(
        "unnormalized_input", "warning",
        f"the input batches are not normalized: median per-batch {', '.join(reasons)}{span}.",
        **_at(signals, step, epoch), evidence=evidence,
        suggestion=("Scale the inputs (x / 255 for pixels) or standardize them: put "
                    "`keras.layers.Normalization()` (adapted on the training data) or "
                    "`keras.layers.Rescaling(1/255)` first in the model, so the scaling travels "
                    "with it."),
    )]


def label_range(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports labels outside what the loss and the output layer accept.

    Args:
        signals: the run, with `data/label_min`, `data/label_max` and its model description.
        thresholds: unused (a label is in range or not).

    Returns:
        At most one finding (error for a classification loss, warning for a regression).

    Raises:
        MissingSignals: without label statistics or without a model description.
    """
    del thresholds
    guarded = _from_guard_events(signals)
    lo, hi = signals.series(_tags.LABEL_MIN), signals.series(_tags.LABEL_MAX)
    if (lo is None or hi is None) and guarded:
        return guarded
    if lo is None or hi is None:
        raise MissingSignals(missing(signals, "batch statistics", "data/input_*, data/label_*"))
    if not signals.model and guarded:
        return guarded
    if not signals.model:
        raise MissingSignals("no model description (config/model): the accepted label range "
                             "depends on the loss and the output layer")
    act = output_activation(signals)
    units = output_units(signals)
    kind = resolved_kind(loss_kind(signals)[0], units)
    if kind == "sparse_categorical" and units:
        accepted, severity, what = (0.0, float(units - 1)), "error", (
            f"sparse categorical cross-entropy over {units} units takes class ids 0..{units - 1}")
    elif kind in ("categorical", "divergence", "binary"):
        accepted, severity, what = (0.0, 1.0), "error", "cross-entropy takes labels in [0, 1]"
    elif kind in ("hinge", "categorical_hinge"):
        accepted, severity, what = (-1.0, 1.0), "error", "hinge losses take labels in [-1, 1]"
    elif kind == "regression" and act in ACTIVATION_RANGE:
        accepted, severity = ACTIVATION_RANGE[act], "warning"
        what = f"a {act} output only reaches [{fmt(accepted[0])}, {fmt(accepted[1])}]"
    else:
        return []
    common, i1, i2 = np.intersect1d(lo.steps, hi.steps, return_indices=True)
    if len(common) and np.all(common >= 0):
        lows, highs, ref = lo.values[i1], hi.values[i2], lo
        idx_map = i1
    else:
        n = min(len(lo), len(hi))
        lows, highs, ref, idx_map = lo.values[:n], hi.values[:n], lo, np.arange(n)
    bad = np.isfinite(lows) & np.isfinite(highs) & ((lows < accepted[0]) | (highs > accepted[1]))
    seen_values = np.r_[lows[np.isfinite(lows)], highs[np.isfinite(highs)]]
    if not len(seen_values):
        return []
    non_integer = kind == "sparse_categorical" and bool(np.any(np.mod(seen_values, 1) != 0))
    if not bad.any() and not non_integer:
        return guarded
    first = int(np.argmax(bad)) if bad.any() else 0
    step, epoch = ref.at(int(idx_map[first]))
    seen = (float(np.min(seen_values)), float(np.max(seen_values)))
    layers = signals.layer_order()
    message = (f"labels span [{fmt(seen[0])}, {fmt(seen[1])}] in {int(bad.sum())} of {len(bad)} "
               f"observed batches, but {what}.")
    if non_integer:
        message += " Some labels are not integers."
    if kind == "sparse_categorical":
        fix = (f"Map the labels to 0..{units - 1} (e.g. `y - y.min()`), or give the output layer "
               f"{int(seen[1]) + 1} units.")
    elif kind == "binary" and _class_ids(seen_values) and seen[0] >= 0 and seen[1] >= 2:
        classes = int(seen[1]) + 1
        message += (f" Labels 0..{classes - 1} are {classes} classes, and binary cross-entropy "
                    "scores one yes/no probability per output: mapping them to {0, 1} would "
                    "merge classes.")
        fix = (f"Give the model one output per class and a multi-class loss: "
               f"`Dense({classes}, activation='softmax')` with "
               "`loss='sparse_categorical_crossentropy'` (and `metrics=['accuracy']`).")
    elif kind == "binary" and _class_ids(seen_values) and seen[0] == -1 and seen[1] == 1:
        fix = "Map the -1/+1 labels to {0, 1}: `(y + 1) / 2`."
    elif kind == "binary":
        fix = ("Scale the targets into [0, 1] (binary cross-entropy takes a probability per "
               "output), or use a regression loss (`'mse'`) with a linear output for targets "
               "outside it.")
    elif kind in ("categorical", "divergence"):
        fix = "Pass one-hot labels, or sparse class ids with sparse categorical cross-entropy."
    else:
        fix = "Scale the targets into the output's range, or use a linear output activation."
    return [Finding(
        "label_range", severity, message, where=layers[-1] if layers else None,
        **_at(signals, step, epoch),
        evidence={"label_min": seen[0], "label_max": seen[1], "accepted_min": accepted[0],
                  "accepted_max": accepted[1], "bad_batches": int(bad.sum()),
                  "batches": len(bad)},
        suggestion=fix,
    )]


def _class_ids(values: np.ndarray) -> bool:
    """Whether every label seen is a whole number (class ids, not scores)."""
    return bool(len(values)) and bool(np.all(np.mod(values, 1) == 0))


def _from_guard_events(signals: Signals) -> list[Finding]:
    """The firewall's own counts of labels it refused (its `labels`/`one_hot`/`probabilities` checks)."""
    events = [e for e in signals.guard_events
              if e.get("stage") == "data" and e.get("check") in ("labels", "one_hot")]
    if not events:
        return []
    first = events[0]
    counts = first.get("counts") or {}
    bad = counts.get("bad")
    total = counts.get("total")
    seen = ""
    if "min" in counts and "max" in counts:
        seen = f" (labels seen in [{fmt(counts['min'])}, {fmt(counts['max'])}])"
    share = f"{int(bad)} of {int(total)} labels" if bad is not None and total else "labels"
    layers = signals.layer_order()
    evidence = {"guard_events": len(events), "check": first.get("check")}
    evidence.update({k: v for k, v in counts.items() if isinstance(v, (int, float))})
    step = first.get("step")
    return [Finding(
        "label_range", "error",
        f"the firewall refused {len(events)} batch(es) whose labels fail its "
        f"'{first.get('check')}' check: {share} out of range in the first{seen}.",
        where=layers[-1] if layers else first.get("where"),
        onset_step=step, onset_epoch=first.get("epoch") if first.get("epoch") is not None
        else signals.epoch_of(step),
        evidence=evidence,
        suggestion=("Map the labels to 0..K-1 integers for sparse categorical cross-entropy over K "
                    "units (fractional labels, e.g. class ids divided by 255, are not class ids), "
                    "or give the output layer as many units as there are classes."),
    )]


def _lint_findings(signals: Signals) -> list[Finding]:
    findings = []
    for item in signals.lint:
        if hasattr(item, "to_dict"):  # a tfguard._findings.Finding
            item = item.to_dict()
        if not isinstance(item, dict):
            item = {"id": "pipeline_order", "message": str(item)}
        if not str(item.get("id", "")).startswith("pipeline"):
            continue
        severity = item.get("severity", "warning")
        if severity not in ("info", "warning", "error"):
            severity = "warning"
        evidence = {k: v for k, v in (item.get("evidence") or {}).items()
                    if isinstance(v, (int, float))}
        code = (item.get("evidence") or {}).get("code")
        if isinstance(code, str):
            evidence["code"] = code
        prefix = f"static check ({code})" if isinstance(code, str) else "static check"
        findings.append(Finding(
            "pipeline_order", severity, f"{prefix}: {item.get('message', '')}",
            where=item.get("where"), onset_step=0, onset_epoch=0, evidence=evidence,
            suggestion=item.get("suggestion") or (
                "Order the pipeline as `ds.shuffle(n).map(...).batch(b).prefetch(AUTOTUNE)`: "
                "shuffle before batch, cache before random augmentation."),
        ))
    return findings


def pipeline_order(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports a wrongly ordered input pipeline, statically or from its footprint.

    Args:
        signals: the run, with `signals.lint` and/or `data/label_min`, `data/label_max`.
        thresholds: uses `pipeline_single_class`, `pipeline_min_batches`,
            `pipeline_min_batch_size`.

    Returns:
        The static findings, plus one finding when batches hold a single class.

    Raises:
        MissingSignals: with neither static findings nor label statistics.
    """
    findings = _lint_findings(signals)
    lo, hi = signals.series(_tags.LABEL_MIN), signals.series(_tags.LABEL_MAX)
    if lo is None or hi is None:
        if findings or signals.lint:
            return findings
        raise MissingSignals("no static pipeline findings (config/lint) and no label statistics "
                             "(data/label_min, data/label_max)")
    common, i1, i2 = np.intersect1d(lo.steps, hi.steps, return_indices=True)
    lows, highs = lo.values[i1], hi.values[i2]
    ok = np.isfinite(lows) & np.isfinite(highs)
    lows, highs, idx = lows[ok], highs[ok], i1[ok]
    if len(lows) < thresholds.pipeline_min_batches:
        return findings
    batch = signals.hparams.get("batch_size")
    if isinstance(batch, (int, float)) and batch < thresholds.pipeline_min_batch_size:
        return findings  # a batch of one example always holds one class
    if np.any(np.mod(lows, 1) != 0) or np.any(np.mod(highs, 1) != 0):
        return findings  # not class ids
    single = lows == highs
    classes, counts = np.unique(lows[single], return_counts=True)
    share = float(single.mean())
    major = classes[counts >= 0.1 * max(1, single.sum())]
    if share < thresholds.pipeline_single_class or len(major) < 2:
        return findings
    step, epoch = lo.at(int(idx[int(np.argmax(single))]))
    findings.append(Finding(
        "pipeline_order", "warning",
        f"{fmt(100 * share)}% of {len(single)} observed batches hold a single class "
        f"({len(classes)} different classes across them): the data reach `batch()` sorted, "
        "without a shuffle before it.",
        **_at(signals, step, epoch),
        evidence={"single_class_fraction": share, "batches": len(single),
                  "classes": len(classes)},
        suggestion=("Shuffle before batching: `ds.shuffle(buffer_size=len(data)).batch(b)` "
                    "(a shuffle after `batch()` only reorders whole sorted batches)."),
    ))
    return findings
