"""Why a step was a spike: does the batch reproduce it, and which of its examples drive it.

A spike (`tfguard._firewall.spikes`) is a loss or a gradient norm far above
the window of the steps before it. Replaying the batch on the state before
the step (the weights the quarantine saved: under `skip` or `raise` the
step was rejected, so they are bitwise those it ran on) tells two causes
apart, as Megatron-LM's `RerunStateMachine` re-runs a suspicious step:

* **it reproduces**: the replayed value is above the threshold again, so the
  batch causes it (corrupted or mislabelled records, an outlier batch);
* **it is transient**: the replayed value is back inside the window's
  spread, so the batch did not cause it (nondeterminism, a hardware fault,
  a value that did not repeat).

The examples that drive it are named by row: each example's loss
(`compute_loss` on its own row of the step's predictions), largest first,
and the fewest of the largest whose removal brings the replayed signal
back under the threshold (the step re-run without them).

Example:

>>> drivers([5.0, 0.1, 9.0, 0.2], mean_without=lambda rows: 0.15 if rows == [2, 0] else 3.0, threshold=1.0)
[2, 0]
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfguard._hooks import keras_compat

SPIKE = "spike"
"""The check stage of a spike as the quarantine records it (`tfguard._firewall.spikes.STAGE`)."""
GRADIENT_NORM = "gradient_norm"
SHOWN = 10
"""The examples a report lists, largest loss first."""
MOST_REMOVED = 16
"""The most examples left out, one more at a time, to find those that drive a spike."""


def signal_value(signal: str, context) -> float | None:
    """The value of `signal` (`"loss"`, `"loss 2"`, `"gradient_norm"`) in a replayed step, as the guard computes it.

    Returns `None` when the step has no such signal (a step that never
    called `compute_loss` has no loss to replay).
    """
    if signal == GRADIENT_NORM:
        squares = [float(np.sum(np.square(np.asarray(g, np.float64))))
                   for update in context.updates for g in update.unscaled() if g is not None]
        return float(np.sqrt(sum(squares))) if squares else None
    losses = context.losses
    index = 0 if signal == "loss" else int(signal.split()[-1]) - 1
    if index >= len(losses):
        return None
    return float(np.sum(np.asarray(losses[index].loss, np.float64)))


def example_losses(model, context, data) -> np.ndarray | None:
    """Each example's loss: `compute_loss` on its own row of the step's inputs, labels and predictions.

    The predictions are those of the replayed step (training mode, the
    batch together), so an example's loss is its share of the batch's.
    `None` when the step never called `compute_loss`.
    """
    if not context.losses:
        return None
    seen = context.losses[0]
    x, y, sample_weight = keras_compat.unpack(data)
    rows = _rows(x)
    if rows is None:
        return None

    def row(value, i):
        return None if value is None else tf.nest.map_structure(lambda t: t[i:i + 1], value)

    losses = []
    for i in range(rows):
        loss = model.compute_loss(x=row(x, i), y=row(y, i), y_pred=row(seen.y_pred, i),
                                  sample_weight=row(sample_weight, i))
        losses.append(float(np.sum(np.asarray(loss, np.float64))))
    return np.asarray(losses)


def _rows(x) -> int | None:
    leaves = [t for t in tf.nest.flatten(x) if t is not None]
    shape = getattr(leaves[0], "shape", None) if leaves else None
    return int(shape[0]) if shape is not None and len(shape) and shape[0] is not None else None


def without(data, rows: list[int]):
    """The batch with `rows` left out (every input, label and sample weight)."""
    x, y, sample_weight = keras_compat.unpack(data)
    keep = tf.constant(sorted(set(range(_rows(x))) - set(rows)), tf.int32)

    def kept(value):
        return None if value is None else tf.nest.map_structure(lambda t: tf.gather(t, keep), value)

    parts = [kept(x), kept(y), kept(sample_weight)]
    while len(parts) > 1 and parts[-1] is None:
        parts.pop()
    return parts[0] if len(parts) == 1 else tuple(parts)


def drivers(losses, mean_without, threshold: float, most: int = MOST_REMOVED) -> list[int] | None:
    """The fewest of the largest-loss rows whose removal brings the signal under `threshold`, or `None`.

    Args:
        losses: each example's loss.
        mean_without: `rows -> the signal replayed without them`.
        threshold: the window's threshold.
        most: the most rows left out. Defaults to `MOST_REMOVED`.
    """
    order = [int(i) for i in np.argsort(-np.asarray(losses), kind="stable")]
    for count in range(1, min(most, len(order) - 1) + 1):
        rows = order[:count]
        if mean_without(rows) <= threshold:
            return rows
    return None


def judge(report, meta: dict, model, context, run_step, data) -> None:
    """Fills the spike fields of a `ReplayReport` from a replayed step.

    Args:
        report: the `ReplayReport` (its `spike_*`, `verdict`, `example_losses`, `driving_rows`).
        meta: the quarantine's metadata (`where`: the signal; `counts`: value, threshold).
        model: the model the batch was replayed on.
        context: the `StepContext` of the step replayed on the batch.
        run_step: `batch -> StepContext`, the step re-run on the state before it (for the rows left out).
        data: the batch.
    """
    counts = meta.get("counts") or {}
    signal = str(meta.get("where", "loss"))
    threshold = float(counts.get("threshold", np.nan))
    report.spike_signal = signal
    report.spike_recorded = float(counts["value"]) if "value" in counts else None
    report.spike_threshold = threshold
    replayed = signal_value(signal, context)
    report.spike_replayed = replayed
    if meta.get("action") == "warned":
        report.verdict_note = ("the step was applied (policy 'warn'): the weights saved are those after it, "
                               "not the state it ran on, so whether it reproduces cannot be told")
    elif replayed is None or not np.isfinite(threshold):
        report.verdict_note = f"the replayed step has no {signal} to compare"
    else:
        report.verdict = "reproduces" if replayed > threshold else "transient"
    losses = example_losses(model, context, data)
    if losses is None:
        report.losses_note = ("the step computes its loss itself (it never calls compute_loss): "
                                "no per-example losses")
        return
    order = np.argsort(-losses, kind="stable")
    report.example_losses = [[int(i), float(losses[i])] for i in order[:SHOWN]]
    if report.verdict != "reproduces":
        return

    def replayed_without(rows):
        value = signal_value(signal, run_step(without(data, rows)))
        return np.inf if value is None else value

    found = drivers(losses, replayed_without, threshold)
    if found is not None:
        report.driving_rows = found
        report.replayed_without = replayed_without(found)


def summary_lines(report) -> list[str]:
    """The spike part of a replay's summary, in words."""
    lines = []
    signal, replayed, threshold = report.spike_signal, report.spike_replayed, report.spike_threshold
    recorded = "" if report.spike_recorded is None else f"recorded {report.spike_recorded:.6g}, "
    if report.verdict == "reproduces":
        lines.append(f"Spike on replay: {signal} {replayed:.6g} again ({recorded}threshold {threshold:.6g}): "
                     "it reproduces, the batch causes it.")
    elif report.verdict == "transient":
        lines.append(f"Spike on replay: {signal} {replayed:.6g} ({recorded}threshold {threshold:.6g}): it does "
                     "not reproduce, a transient (nondeterminism or a hardware fault), not the batch.")
    else:
        lines.append(f"Spike on replay: {report.verdict_note}.")
    if report.example_losses:
        shown = ", ".join(f"row {row} ({loss:.4g})" for row, loss in report.example_losses[:5])
        lines.append(f"Largest per-example losses: {shown}.")
    elif report.losses_note:
        lines.append(f"Examples: {report.losses_note}.")
    if report.driving_rows:
        rows = ", ".join(str(r) for r in report.driving_rows)
        lines.append(f"The examples that drive it: row(s) {rows}; without them the {signal} is "
                     f"{report.replayed_without:.6g} (threshold {threshold:.6g}).")
    elif report.verdict == "reproduces" and report.example_losses:
        lines.append(f"No {MOST_REMOVED} examples or fewer explain it: the whole batch is off (a shifted "
                     "or mis-scaled batch, not a few records).")
    return lines


__all__ = ["GRADIENT_NORM", "MOST_REMOVED", "SHOWN", "SPIKE", "drivers", "example_losses", "judge",
           "signal_value", "summary_lines", "without"]
