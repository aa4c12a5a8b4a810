"""One frozen value per step: what a guarded or recording step returned, read once on the host.

After each step the host (`tfguard._firewall.host.HostLoop.after_step`, or a
hand-written loop's `GuardedStep`) turns the step's outputs into one
`StepOutcome` with `step_outcome`, and hands that same value to every
consumer: the policy (`PolicyEnforcer.handle`), the record bus (the
`StepRecord` a listener gets), the logs Keras shows, the counters. Nothing
of it can change once made: the arrays are read-only, the mappings are
views that refuse assignment.

What is read off the device is what the step's consumers need: the flags
and the decision every step (the host reads them anyway to apply the
policy), the recorded signals only on a step that recorded them, and the
numbers behind a failure (NaN/Inf counts, a data check's values, a spike's
window) only on a step where something failed.

Example:

>>> import numpy as np
>>> from tfguard._firewall.stages import Slot
>>> from tfguard._firewall.step import Plan
>>> plan = Plan(slots=[Slot("data", "x", "finite"), Slot("loss", "loss", "finite")], finite_slots=[0, 1],
...             data_results=[], scalar_keys=[], histogram_keys=[], kinds=frozenset(), coverage=[])
>>> outputs = {"failures": np.array([1.0, 1.0]), "applied": np.float32(0.0), "iterations": np.int64(4),
...            "finite_counts": np.array([[1, 0, 0, 8], [1, 0, 0, 1]])}
>>> outcome = step_outcome(outputs, {"loss": 0.5}, plan, step_before=4, position=(9, 1, 2))
>>> outcome.applied, outcome.moved, outcome.step_after, outcome.failed_stages
(False, False, 4, ('data', 'loss'))
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping

import numpy as np

from tfguard import _tags
from tfguard._firewall.spikes import TABLE
from tfguard._firewall.step import Plan, step_after
from tfguard._signals.record import HISTOGRAMS

_EMPTY: Mapping = types.MappingProxyType({})
_NO_FAILURES = np.zeros(0, np.float32)
_NO_FAILURES.setflags(write=False)


@dataclasses.dataclass(frozen=True, eq=False)  # compared by identity: its arrays have no one truth value
class StepOutcome:
    """What one step did, as its consumers read it (frozen; its arrays are read-only).

    Args:
        step_before: the global step the step started from (the optimizer's iterations).
        step_after: the global step after it (unchanged when the update was rejected).
        applied: whether the guard let the update through (`True` on a step
            with no guard).
        batch: the 0-based index of the batch among all batches the model
            trained on (across `fit` calls).
        epoch: the 0-based epoch of `fit`, or `None` outside `fit`.
        epoch_batch: the 0-based index of the batch in its epoch, or `None`.
        batch_size: the batch's leading dimension, when known on the host.
        failures: per check slot of the step's plan, how many replicas failed
            it (empty when the step ran no check).
        failed_slots: the indices of the failed slots, the first stage's first.
        failed_stages: the stages that failed (`data`, `forward`, ...), in
            the order a violation names them (`tags.GUARD_STAGES`).
        finite_counts: per finite slot, its NaN, +Inf, -Inf and value counts,
            when something failed; else `None`.
        data_values: per data check counted in the graph (several
            replicas), its values, when something failed; else `None`.
        spike_table: the spike stage's rows (value, mean, std, threshold,
            steps held, scale), when something failed; else `None`.
        recorded: what the step recorded (`"scalars"`, `"histograms"`), or nothing.
        signals: tag -> value of the scalar signals the step recorded.
        histograms: tag -> `[k, 3]` buckets of the histograms the step recorded.
        input_wait_fraction: the share of the step's wall time spent waiting
            for its batch, when it was measured.
        logs: the step's own logs (the metrics Keras shows), a read-only
            mapping; or what a step that returns no dict returned.
    """

    step_before: int
    step_after: int
    applied: bool
    batch: int
    epoch: int | None = None
    epoch_batch: int | None = None
    batch_size: int | None = None
    failures: np.ndarray = dataclasses.field(default_factory=lambda: _NO_FAILURES)
    failed_slots: tuple[int, ...] = ()
    failed_stages: tuple[str, ...] = ()
    finite_counts: np.ndarray | None = None
    data_values: Mapping[str, Mapping[str, np.ndarray]] | None = None
    spike_table: np.ndarray | None = None
    recorded: frozenset = frozenset()
    signals: Mapping[str, float] = dataclasses.field(default_factory=lambda: _EMPTY)
    histograms: Mapping[str, np.ndarray] = dataclasses.field(default_factory=lambda: _EMPTY)
    input_wait_fraction: float | None = None
    logs: object = dataclasses.field(default_factory=lambda: _EMPTY)

    @property
    def moved(self) -> bool:
        """Whether the step moved the global step (its update changed the weights)."""
        return self.step_after != self.step_before

    @property
    def checked(self) -> bool:
        """Whether the guard's checks ran on this step."""
        return self.failures.size > 0

    @property
    def violated(self) -> bool:
        """Whether a check failed."""
        return bool(self.failed_slots)


def step_outcome(outputs: Mapping, logs, plan: Plan | None, *, step_before: int, position: tuple,
                 batch_size: int | None = None, recorded: frozenset = frozenset(),
                 input_wait_fraction: float | None = None) -> StepOutcome:
    """The one `StepOutcome` of a step, from what it returned.

    Args:
        outputs: the step's tfguard outputs (`failures`, `applied`,
            `iterations`, `signals`, ...; tensors or arrays).
        logs: the step's own logs (a dict, or what the step returned).
        plan: the `Plan` of the trace that ran (its slots and signal tags);
            `None` for a step that checked and recorded nothing.
        step_before: the global step before the step.
        position: `(batch, epoch, epoch_batch)`.
        batch_size: the batch's leading dimension, if known. Defaults to `None`.
        recorded: what the step was asked to record. Defaults to nothing.
        input_wait_fraction: the measured share of waiting for the batch.
            Defaults to `None`.

    Returns:
        A `StepOutcome`.
    """
    step, _ = step_after(outputs, step_before)
    batch, epoch, epoch_batch = position
    failures = _read_only(outputs["failures"]) if "failures" in outputs else _NO_FAILURES
    failed = np.flatnonzero(failures).tolist()  # a step holds a flag per variable: no Python loop over them
    stages: tuple[str, ...] = ()
    numbers: dict = {}
    if failed:
        order = {name: rank for rank, name in enumerate(_tags.GUARD_STAGES)}
        failed.sort(key=lambda i: (order[plan.slots[i].stage], i))
        stages = tuple(sorted({plan.slots[i].stage for i in failed}, key=order.__getitem__))
        if "finite_counts" in outputs:
            numbers["finite_counts"] = _read_only(outputs["finite_counts"])
        if "data_values" in outputs:
            numbers["data_values"] = types.MappingProxyType({
                index: types.MappingProxyType({k: _read_only(v) for k, v in values.items()})
                for index, values in outputs["data_values"].items()})
        if TABLE in outputs:
            numbers["spike_table"] = _read_only(outputs[TABLE])
    signals, histograms = _EMPTY, _EMPTY
    if recorded and plan is not None:
        if "signals" in outputs:
            values = np.asarray(outputs["signals"], np.float64).tolist()
            signals = types.MappingProxyType(dict(zip(plan.scalar_keys, values)))
        if "histograms" in outputs and HISTOGRAMS in recorded:
            stacked = np.array(outputs["histograms"], np.float64)
            stacked.setflags(write=False)
            histograms = types.MappingProxyType(dict(zip(plan.histogram_keys, stacked)))
    return StepOutcome(
        step_before=step_before, step_after=step, applied=float(outputs.get("applied", 1.0)) > 0,
        batch=batch, epoch=epoch, epoch_batch=epoch_batch, batch_size=batch_size,
        failures=failures, failed_slots=tuple(failed), failed_stages=stages, **numbers,
        recorded=frozenset(recorded), signals=signals, histograms=histograms,
        input_wait_fraction=input_wait_fraction,
        logs=types.MappingProxyType(dict(logs)) if isinstance(logs, Mapping) else logs,
    )


def _read_only(value) -> np.ndarray:
    array = np.array(value)
    array.setflags(write=False)
    return array


__all__ = ["StepOutcome", "step_outcome"]
