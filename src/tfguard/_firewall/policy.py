"""What the host does about a violation: word it, save the batch, localize it, act by policy.

`PolicyEnforcer.handle` reads the `StepOutcome` of each checked step: it
counts the step, and turns the failed flags of a rejected (or, under `warn`,
accepted) step into a `GuardEvent`, and then:

* saves the batch to the quarantine folder (at most `max_quarantined`
  attempts per model, failed ones included: a full disk is not written to
  at every later violation). A folder that cannot be written (read-only,
  disk full) never stops training under `skip` or `warn`: one
  `GuardWarning` names the folder and the reason, the violation is still
  counted and reported, and the partial folder is removed.
  Under `raise` the write failure is part of the raised message;
* localizes the first quarantined batches while the live model is at hand
  (a replay: first non-finite layer, variable and op), for every policy,
  and stores the result beside the batch (`replay.json`), so
  `tfguard replay PATH` can show it when the model cannot be loaded back;
* raises `GuardViolation` (`raise`, or `skip` after too many skips in a
  row), or warns (`warn`).

Example:

>>> describe_position(37, 2, 5)
'batch 37 (epoch 2, batch 5 of the epoch)'
>>> describe_position(3, None, None)
'batch 3'
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from tfguard._errors import GuardViolation
from tfguard._findings import STAGE_FIXES
from tfguard._firewall import spikes
from tfguard._firewall.outcome import StepOutcome
from tfguard._forensics.examples import (
    Recurrences,
    describe_recurrences,
    describe_rows,
    fingerprint,
    rows_at_fault,
)
from tfguard._forensics.quarantine import save_quarantine, store_replay
from tfguard._forensics.replay import replay
from tfguard._hooks import keras_compat
from tfguard.checks import hint_for

ACTIONS = {"raise": "raised", "skip": "skipped", "warn": "warned"}


class GuardWarning(UserWarning):
    """A violation under policy `"warn"`, or a quarantine that could not be written."""


@dataclasses.dataclass
class GuardEvent:
    """One violation as the host saw it.

    Args:
        step: the global step when the batch was tried (the optimizer's iterations).
        stage: data, forward, loss, gradients or update (the first that failed).
        where: the tensor, layer or variable.
        message: the full text.
        counts: the numbers behind it.
        action: `"raised"`, `"skipped"` or `"warned"`.
        quarantine: the folder of the saved batch, if saved.
        failed: every failed slot as `"stage: where"`.
        replay: the `ReplayReport` of the batch, when it was localized.
        batch: the 0-based index of the batch among all batches the model
            trained on (across `fit` calls). Defaults to the step.
        epoch: the 0-based epoch of `fit`, or `None` outside `fit`.
        epoch_batch: the 0-based index of the batch in its epoch, or `None`.
        applied: whether the update was applied (only under `warn`).
        quarantine_error: why the batch could not be saved, if it could not.
        check: the check that failed first (`finite`, `labels`, `range`, ...).
        examples: for a data check, the rows of the batch it rejects: `row`, `bad`
            and `values` (how many of the row's values), `fingerprint` (a hash of the
            example's values) and `earlier` (where the same values were at fault before).
    """

    step: int
    stage: str
    where: str
    message: str
    counts: dict
    action: str
    quarantine: str | None = None
    failed: list = dataclasses.field(default_factory=list)
    replay: object = None
    batch: int | None = None
    epoch: int | None = None
    epoch_batch: int | None = None
    applied: bool = False
    quarantine_error: str | None = None
    check: str = "finite"
    examples: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        if self.batch is None:
            self.batch = self.step


def describe_position(batch: int, epoch: int | None, epoch_batch: int | None) -> str:
    """Where a batch sits, in words (0-based, as Keras callbacks count)."""
    text = f"batch {batch}"
    if epoch is not None:
        text += f" (epoch {epoch}"
        text += f", batch {epoch_batch} of the epoch)" if epoch_batch is not None else ")"
    return text


class Counters:
    """The violation counters of a guarded model (or step function), across its steps."""

    def __init__(self):
        self.violations = 0
        self.skipped = 0
        self.epoch_violations = 0
        self.epoch_skipped = 0
        self.consecutive_skips = 0

    def count(self, outcome: StepOutcome) -> None:
        """Counts one checked step: a violation (its update applied under `warn`, or not), or a clean step."""
        if not outcome.violated:
            self.consecutive_skips = 0
            return
        self.violations += 1
        self.epoch_violations += 1
        if outcome.applied:
            self.consecutive_skips = 0
        else:
            self.skipped += 1
            self.epoch_skipped += 1
            self.consecutive_skips += 1

    def reset_epoch_counts(self) -> None:
        """Starts the counts Keras shows per epoch (`guard_violations`, `guard_skipped`) over."""
        self.epoch_violations = 0
        self.epoch_skipped = 0


class PolicyEnforcer:
    """Enforces the policy of one guarded model: turns failed flags into events and acts.

    Args:
        inst: the model's `Instrumentation` (config, contract, counters).
    """

    def __init__(self, inst):
        self.inst = inst
        self._write_warned = False
        self.quarantined = 0  # saves attempted, failed ones included (max_quarantined caps them)
        self.recurrences = Recurrences()  # the fingerprints of the rows at fault, across fits

    def handle(self, outcome: StepOutcome, plan, data) -> GuardEvent | None:
        """Counts a checked step; on a violation, words it, quarantines and localizes it, and acts by policy.

        Args:
            outcome: the step's `StepOutcome`.
            plan: the `Plan` of the trace that ran (what each slot checked).
            data: the batch (Keras's `(x, y, sw)` or `x`), on the host.

        Returns:
            The `GuardEvent` of a violation, or `None` when every check passed.

        Raises:
            GuardViolation: under `raise`, or `skip` after too many skips in a row.
        """
        inst, config = self.inst, self.inst.guard
        inst.count(outcome)
        if not outcome.violated:
            return None
        failed = outcome.failed_slots
        first = plan.slots[failed[0]]
        counts, detail, rows = self._describe(plan, failed[0], outcome, data)
        applied = outcome.applied
        batch, epoch, epoch_batch, step = outcome.batch, outcome.epoch, outcome.epoch_batch, outcome.step_after
        rows = self.recurrences.note(rows, epoch, batch)
        update = "The update was applied." if applied else "The update was not applied."
        others = [f"{plan.slots[i].stage}: {plan.slots[i].where}" for i in failed]
        message = (f"{first.where} at {describe_position(batch, epoch, epoch_batch)} {detail} "
                   f"(stage: {first.stage}, policy: {config.policy}, global step {step}). "
                   f"{update}")
        if len(failed) > 1:
            more = f' and {len(others) - 6} more' if len(others) > 6 else ''
            message += f" Also failed: {', '.join(others[1:6])}{more}."
        recurring = describe_recurrences(rows)
        if recurring:
            message += f" {recurring}"
        event = GuardEvent(step, first.stage, first.where, message, counts,
                           ACTIONS[config.policy], failed=others, batch=batch, epoch=epoch,
                           epoch_batch=epoch_batch, applied=applied, check=first.check, examples=rows)
        if config.max_quarantined and self.quarantined < config.max_quarantined:
            message = self._quarantine(event, data, message)
        event.message = message
        inst.events.append(event)
        for listener in list(inst.event_listeners):
            listener(event)
        self._act(event, first, counts)
        return event

    # -- quarantine and localization ---------------------------------------------------
    def _quarantine(self, event: GuardEvent, data, message: str) -> str:
        inst, config = self.inst, self.inst.guard
        model = inst.model
        self.quarantined += 1  # a failed save counts too: a full disk is not tried at every violation
        try:
            event.quarantine = save_quarantine(config.quarantine_dir, model, data, event,
                                               strategy=model.distribute_strategy)
        except (OSError, ValueError) as error:
            event.quarantine_error = f"{type(error).__name__}: {error}"
            reason = (f"the batch could not be saved in {config.quarantine_dir!r} "
                      f"({event.quarantine_error})")
            if config.policy != "raise" and not self._write_warned:
                self._write_warned = True
                warnings.warn(f"tfguard: {reason}; training goes on and violations are still "
                              "counted and reported. Fix: point quarantine_dir at a writable "
                              "folder with free space.", GuardWarning, stacklevel=4)
            return message + f" {reason[0].upper()}{reason[1:]}."
        message += f" The batch is saved in {event.quarantine}."
        if config.localize:
            report = self._localize(event)
            if report is not None:
                event.replay = report
                message += "\n" + report.summary()
                if report.driving_rows:  # a spike's rows: remembered, and recognized when they come back
                    message += self._spike_rows(event, report, data)
                store_replay(event.quarantine, report, model)
        return message

    def _spike_rows(self, event: GuardEvent, report, data) -> str:
        """Fingerprints the rows the replay found driving a spike; a sentence when they were at fault before."""
        batch = keras_compat.unpack(data)
        rows = [{"row": int(row), "fingerprint": fingerprint(batch, int(row))} for row in report.driving_rows]
        event.examples = self.recurrences.note(rows, event.epoch, event.batch)
        recurring = describe_recurrences(event.examples)
        return f"\n{recurring}" if recurring else ""

    def _localize(self, event: GuardEvent):
        inst = self.inst
        if inst.model.distribute_strategy.num_replicas_in_sync > 1:
            event.failed.append("replay: not run under a multi-replica strategy (the step would "
                                "need every replica); run `tfguard replay PATH` on one device")
            return None
        try:
            return replay(event.quarantine, model=inst.model, step_fn=inst.original_step)
        except Exception as error:  # localization is best effort; the violation stands
            event.failed.append(f"replay: {type(error).__name__}: {error}")
            return None

    # -- the policy --------------------------------------------------------------------
    def _act(self, event: GuardEvent, first, counts: dict) -> None:
        inst, config = self.inst, self.inst.guard
        hint = hint_for(first.check) if first.stage == "data" else STAGE_FIXES[first.stage]
        stopped = None
        if config.policy == "raise":
            stopped = event.message
        elif config.policy == "skip" and inst.consecutive_skips > config.max_consecutive_skips:
            stopped = (f"Training stopped after {inst.consecutive_skips} consecutive skipped steps "
                       f"(max_consecutive_skips={config.max_consecutive_skips}); the weights are "
                       f"those of global step {event.step}, the last good update. "
                       f"Last violation: {event.message}")
            if first.stage == spikes.STAGE:
                stopped += (" Spikes in a row are a new level, not outliers: an update before them "
                            "damaged the weights (a learning-rate burst), or the data changed (guard "
                            "the model again to start the window over).")
        if stopped is not None:
            raise GuardViolation(stopped, stage=first.stage, where=first.where,
                                 step=event.step, counts=counts, quarantine=event.quarantine,
                                 hint=hint, batch=event.batch, epoch=event.epoch)
        if config.policy == "warn":
            warnings.warn(f"GuardViolation: {event.message}", GuardWarning, stacklevel=4)

    def _describe(self, plan, index: int, outcome: StepOutcome, data) -> tuple[dict, str, list[dict]]:
        """The counts behind a failed slot, its words, and (a data check on the host) the rows it rejects."""
        slot = plan.slots[index]
        if slot.stage == spikes.STAGE:  # its rows are named by the replay (`forensics.spike_replay`)
            return (*spikes.describe(plan, index, outcome.spike_table, self.inst.guard.spikes.sigmas), [])
        if index in plan.finite_slots:
            row = outcome.finite_counts[plan.finite_slots.index(index)]
            nan, posinf, neginf, total = (int(v) for v in row)
            counts = {"nan": nan, "posinf": posinf, "neginf": neginf, "total": total}
            verb = "would have" if slot.stage == "update" else "has"
            if nan < 0:  # judged by its sum alone, not kept to be counted (a gated step)
                return {"total": total}, f"{verb} a NaN or Inf among its {total} values", []
            return counts, f"{verb} {nan} NaN, {posinf} +Inf, {neginf} -Inf of {total} values", []
        data_index = sum(1 for s in plan.slots[:index] if s.stage == "data")
        rows, batch_rows = [], None
        if outcome.data_values is not None:  # several replicas: counted in the graph, all-reduced
            result = plan.data_results[data_index]
            values = dict(outcome.data_values[str(data_index)])
        else:  # the batch is here: word the failure from it, and name its rows
            x, y, sample_weight = keras_compat.unpack(data)
            result = self.inst.contract.evaluate(x, y, sample_weight)[data_index]
            values = {k: np.asarray(v) for k, v in result.tensors().items()}
            checked = self.inst.contract.checked(x, y, sample_weight)
            if data_index < len(checked):  # a value check (the shape checks come after them)
                _, tensor, check = checked[data_index]
                rows = [{**row, "fingerprint": fingerprint((x, y, sample_weight), row["row"])}
                        for row in rows_at_fault(check, tensor)]
                batch_rows = int(np.shape(tensor)[0]) if np.ndim(tensor) else None
        counts = {k: v.item() for k, v in values.items() if np.ndim(v) == 0 and k != "ok"}
        detail = f"failed check '{slot.check}': {result.describe(values)}"
        if rows:
            detail += f", {describe_rows(rows, batch_rows)}"
        return counts, detail, rows


__all__ = ["ACTIONS", "Counters", "GuardEvent", "GuardWarning", "PolicyEnforcer", "describe_position"]
