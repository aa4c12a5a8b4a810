"""Rule `loss_spike`: steps whose loss jumped far above the steps before them.

The firewall's spike stage (`tfguard.guard(model, spikes=True)`) records
every spike it saw (`guard/records`, check stage `spike`: the signal, its
value, the window's mean, std and threshold, and what was done). Without
it, the rule finds them in the logged batch losses with the same rule,
OLMo-core's `SkipStepOptimizer`: a point above the mean + `spike_sigmas`
standard deviations of the `spike_window` points before it (the spikes
left out), once `spike_warmup` are held.

Keras logs a batch's `loss` as the running mean of its epoch so far, both
in its own `TensorBoard(update_freq=N)` callback (`batch_loss`, every N
batches) and in what tfguard's Logger writes (`batch/loss`): a spike of one
batch shows in it diluted by the batch's place in the epoch. The rule
undoes the mean first (`per_batch`): between two logged points `k1 < k2`
of one epoch, the batches in between lost `(k2 * m2 - k1 * m1) / (k2 - k1)`
on average. A series that is not a running mean (a custom step returning
its batch loss) is read as it is (`is_running_mean`).

Severity: a spike the firewall rejected hurt nothing (`info`: the data
holds bad records, and they come back every epoch); a spike that was
applied (no firewall, or `warn`) is a `warning`.

Example:

>>> import numpy as np
>>> values = np.r_[np.linspace(1.0, 0.9, 80) + 0.01 * np.sin(np.arange(80)), 5.0, 0.89, 0.9]
>>> [i for i, *_ in spike_points(values, window=128, sigmas=6.0, warmup=64)]
[80]
"""

from __future__ import annotations

import numpy as np

from tfguard import _tags
from tfguard._findings import Finding, fmt
from tfguard.diagnose._inputs.signals import MissingSignals, Series, Signals, epochs_for
from tfguard.diagnose._thresholds import Thresholds

SPIKE = "spike"
"""The firewall's check stage of a spike, as its records name it."""
REJECTED = ("skipped", "raised")
SHOWN = 50
"""The most spikes a finding's evidence lists (their steps and batches, as text); `count` says how many there were."""
MIN_SLOPE_POINTS = 20


def spike_points(values, window: int, sigmas: float, warmup: int) -> list[tuple[int, float, float, float]]:
    """`(index, mean, std, threshold)` of each spike of a series, the firewall's rule run offline.

    A point is compared with the last `window` finite points before it
    that were not spikes; a spike and a non-finite point never enter.
    """
    values = np.asarray(values, np.float64)
    held: list[float] = []
    found = []
    for index, value in enumerate(values):
        if not np.isfinite(value):
            continue
        recent = held[-window:]
        if len(recent) >= warmup:
            mean, std = float(np.mean(recent)), float(np.std(recent, ddof=1))
            threshold = mean + sigmas * std
            if value > threshold:
                found.append((index, mean, std, threshold))
                continue
        held.append(float(value))
    return found


def _within_epoch(steps: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each point's epoch and its batch count in that epoch (1-based), from the last step of each epoch."""
    epoch = np.searchsorted(ends, steps, side="left")
    starts = np.concatenate([[0], ends])[np.minimum(epoch, len(ends))]
    return epoch, steps - starts


def infer_epoch_ends(batch: Series, epoch_losses: Series | None) -> np.ndarray | None:
    """The last batch of each epoch of a stock Keras run logged without validation, or `None`.

    The running mean at an epoch's last batch is the epoch's loss Keras
    logs (`epoch_loss`): the batches per epoch `P` are those that make the
    logged points at `P, 2P, ...` equal the epoch losses, among the `P`
    the number of epochs and the last logged batch allow.
    """
    if epoch_losses is None or not len(epoch_losses) or not batch.has_steps:
        return None
    epochs = len(epoch_losses)
    steps = batch.steps
    last = int(steps[-1])
    every = int(np.min(np.diff(steps))) if len(steps) > 1 else 1
    by_step = dict(zip(steps.tolist(), batch.values.tolist()))
    best = None
    for per in range(max(1, -(-last // epochs)), (last + every - 1) // epochs + 1):
        checked = [(e, (e + 1) * per) for e in range(epochs) if (e + 1) * per in by_step]
        if checked and all(np.isclose(by_step[s], epoch_losses.values[e], rtol=1e-5, atol=1e-7) for e, s in checked):
            return (np.arange(1, epochs + 1) * per).astype(np.int64)
        if not checked and best is None:
            best = per
    return None if best is None else (np.arange(1, epochs + 1) * best).astype(np.int64)


def _undo(steps: np.ndarray, values: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The losses of the batches between logged points, read as running means of each epoch; each point's epoch and k."""
    epoch, k = _within_epoch(steps, ends)
    losses = values.copy()
    for i in range(1, len(values)):
        if epoch[i] == epoch[i - 1] and k[i] > k[i - 1]:
            losses[i] = (k[i] * values[i] - k[i - 1] * values[i - 1]) / (k[i] - k[i - 1])
    return losses, epoch, k


def is_running_mean(steps: np.ndarray, values: np.ndarray, ends: np.ndarray) -> bool:
    """Whether a batch series is a running mean over each epoch (Keras's `loss`), from what undoing it gives.

    Undoing a running mean gives the batches' own losses, whose steps do
    not grow along the epoch. Undoing what already is a batch's own loss
    multiplies its noise by the batch's place `k` in the epoch: the steps
    grow as `k`. The slope of `log |step|` against `log k` tells them
    apart (about 0, or about 1); with too few points to tell, it is read as
    Keras writes it: a running mean.
    """
    losses, epoch, k = _undo(steps, values, ends)
    same = (np.diff(epoch) == 0) & (np.diff(k) > 0)
    same[1:] &= same[:-1]  # both points of a step undone within one epoch
    moves = np.abs(np.diff(losses))[same]
    at = k[1:][same].astype(np.float64)
    keep = (moves > 0) & np.isfinite(moves)
    if keep.sum() < MIN_SLOPE_POINTS or at[keep].max() < 4 * at[keep].min():
        return True
    slope = np.polyfit(np.log(at[keep]), np.log(moves[keep]), 1)[0]
    return bool(slope < 0.5)


def per_batch(signals: Signals) -> tuple[Series, str]:
    """The batch losses of a run, a running mean undone; and how they were read, in words.

    Raises:
        MissingSignals: without a logged `batch/loss`.
    """
    batch = signals.series(_tags.batch("loss"))
    if batch is None or not len(batch) or not batch.has_steps:
        raise MissingSignals("no batch losses were logged (tfguard.summary.Logger, or keras.callbacks."
                             "TensorBoard(update_freq=N)), and no spike recorded by the firewall")
    ends = signals.epoch_end_steps
    if ends is None or not len(ends):
        ends = infer_epoch_ends(batch, signals.series(_tags.train("loss")))
    steps, values = batch.steps.astype(np.int64), batch.values.astype(np.float64)
    if ends is None:
        return batch, "the logged batch losses"
    ends = np.asarray(ends, np.int64)
    batch = Series(steps, values, epochs_for(steps, ends))
    if not is_running_mean(steps, values, ends):
        return batch, "the logged batch losses"
    losses, _, _ = _undo(steps, values, ends)
    return Series(steps, losses, batch.epochs), "the batch losses, Keras's running mean of each epoch undone"


def spikes_of(signals: Signals, thresholds: Thresholds) -> tuple[list[dict], str, str]:
    """The loss spikes of a run, each `{step, epoch, batch, value, mean, std, threshold, action}`; where and whence.

    From the firewall's records of its spike stage when it has any, else
    from the logged batch losses (`per_batch`) with the firewall's rule
    (`spike_points`, `action` "applied"). Returns `(spikes, where, source)`:
    the signals that spiked (`"loss"`, `"gradient_norm"`) and where they were found.

    Raises:
        MissingSignals: with neither spike records nor batch losses.
    """
    records = [e for e in signals.guard_events if e.get("stage") == SPIKE]
    if records:
        spikes, where = [], []
        for record in records:
            counts = record.get("counts") or {}
            spikes.append({"step": int(record.get("step", 0)), "epoch": record.get("epoch"),
                           "batch": record.get("batch"), "value": counts.get("value", np.nan),
                           "mean": counts.get("mean", np.nan), "std": counts.get("std", np.nan),
                           "threshold": counts.get("threshold", np.nan), "action": str(record.get("action", ""))})
            if record.get("where") and record["where"] not in where:
                where.append(str(record["where"]))
        return spikes, ", ".join(where) or "loss", "the firewall's records"
    series, source = per_batch(signals)
    found = spike_points(series.values, thresholds.spike_window, thresholds.spike_sigmas, thresholds.spike_warmup)
    return ([{"step": int(series.steps[i]), "epoch": series.at(i)[1], "batch": None,
              "value": float(series.values[i]), "mean": mean, "std": std, "threshold": threshold,
              "action": "applied"} for i, mean, std, threshold in found], "loss", source)


def loss_spike(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports the steps whose loss (or gradient norm) was a spike (`spikes_of`).

    Args:
        signals: the run: the firewall's spike records, else `batch/loss`.
        thresholds: uses `spike_window`, `spike_sigmas`, `spike_warmup`
            (for batch losses; the firewall's records carry their own).

    Returns:
        At most one finding: `info` when the firewall rejected every spike,
        `warning` when one was applied.

    Raises:
        MissingSignals: with neither spike records nor batch losses.
    """
    spikes, where, source = spikes_of(signals, thresholds)
    if not spikes:
        return []
    rejected = sum(s["action"] in REJECTED for s in spikes)
    return [_finding(signals, spikes, where, rejected=rejected, source=source)]


def _finding(signals: Signals, spikes: list[dict], where: str, *, rejected: int, source: str) -> Finding:
    first = spikes[0]
    sizes = [(s["value"] - s["mean"]) / s["std"] if s["std"] and s["std"] > 0 else np.inf for s in spikes]
    largest = int(np.argmax(sizes))
    count, applied = len(spikes), len(spikes) - rejected
    epoch = first.get("epoch")
    if epoch is None:
        epoch = signals.epoch_of(first["step"])
    at = f"step {first['step']}" + (f" (epoch {epoch})" if epoch is not None else "")
    big = spikes[largest]
    times = f" + {fmt((first['threshold'] - first['mean']) / first['std'])} std" if first["std"] else ""
    message = (f"{count} loss spike(s) in {source}, the first at {at}: {where} {fmt(first['value'])} against a "
               f"threshold of {fmt(first['threshold'])} (the mean {fmt(first['mean'])}{times} of the steps before); "
               f"the largest lay {fmt(sizes[largest])} std above its window (step {big['step']}). ")
    if rejected == count:
        message += "The firewall rejected every one: no update was applied."
    elif rejected:
        message += f"The firewall rejected {rejected}; {applied} were applied."
    else:
        message += "None was rejected: every update was applied."
    evidence = {"count": count, "rejected": rejected, "applied": applied, "largest_sigmas": sizes[largest],
                "largest_step": big["step"], "first_value": first["value"], "first_threshold": first["threshold"],
                "steps": ", ".join(str(s["step"]) for s in spikes[:SHOWN]), "source": source}
    batches = [str(s["batch"]) for s in spikes if s.get("batch") is not None]
    if batches:
        evidence["batches"] = ", ".join(batches[:SHOWN])
    suggestion = ("Replay a quarantined batch (`tfguard replay PATH`): it says whether the spike reproduces and "
                  "names the rows that drive it; drop or fix those records (they come back every epoch).")
    if applied:
        suggestion += (" Guard the training with `tfguard.guard(model, policy=\"skip\", spikes=True)` to reject "
                       "such steps with the model left bitwise as it was.")
    return Finding("loss_spike", "warning" if applied else "info", message, where=where, evidence=evidence,
                   suggestion=suggestion, onset_step=first["step"], onset_epoch=epoch)


__all__ = ["infer_epoch_ends", "is_running_mean", "loss_spike", "per_batch", "spike_points", "spikes_of"]
