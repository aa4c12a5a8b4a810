"""What the firewall rejected outside any `fit`: one diagnosed run per model or optimizer.

A script that trains with `train_on_batch` or a hand-written loop never
calls `fit`, so no `FitRun` records it; the firewall still checks its
updates: a model guarded by the script (`tfguard.guard`) keeps its
violations (`GuardEvent`s), and under `tfguard run` every optimizer's update
outside a guarded step passes the session's gate, which counts what it
rejects (`tfguard._firewall.loop.gate_counts`). A rejected update is never
silent: `outside_fit_records` makes a `FitRecord` for each model with
violations no fit recorded (run `<model>-outside-fit`) and for each
optimizer whose gate rejected updates (run `<optimizer>-outside-fit`), each
with the diagnosis of what the firewall saw (the `nonfinite` rule reads
the violations, `tfguard._findings.event_record`).

Example:

>>> records = outside_fit_records([], {"adam": 3}, first_index=1, before=events_now())
>>> (records[0].run, records[0].diagnosis.findings[0].id)
('adam-outside-fit', 'nonfinite')
"""

from __future__ import annotations

from tfguard._findings import event_record
from tfguard._firewall.instrument import instrumentation_of, instrumented_models
from tfguard.attach._records import FitRecord
from tfguard.diagnose import Signals, diagnose


def _diagnosed(run: str, model: str, index: int, events: list[dict], guard_events=()) -> FitRecord:
    diagnosis = diagnose(Signals(run=run, guard_events=events, source="live"))
    return FitRecord(run=run, model=model, index=index, diagnosis=diagnosis,
                     guard_events=list(guard_events), guarded=True, kind="outside-fit")


def events_now() -> dict[int, int]:
    """How many violations each model tfguard is attached to holds now (by `id`): what a session
    opened now finds, so that it reports only what happened while it was open."""
    return {id(model): len(inst.events) for model in instrumented_models()
            if (inst := instrumentation_of(model)) is not None}


def outside_fit_records(fits: list[FitRecord], gate_counts: dict[str, int],
                        first_index: int, before: dict[int, int] | None = None) -> list[FitRecord]:
    """The records of the updates the firewall rejected outside any recorded `fit`.

    Args:
        fits: the session's fit records (their violations are accounted for).
        gate_counts: optimizer name -> updates its gate rejected outside a guarded step.
        first_index: the session index of the first new record.
        before: `events_now()` when the session opened: older violations are not its own.
            Defaults to `None` (every violation counts).

    Returns:
        One `FitRecord` per model with violations no fit recorded, then one per
        optimizer with rejected updates, each with its `Diagnosis`.
    """
    recorded = {id(e) for fit in fits for e in fit.guard_events}
    records = []
    for model in instrumented_models():
        inst = instrumentation_of(model)
        held = list(inst.events) if inst is not None else []
        events = [e for e in held[(before or {}).get(id(model), 0):] if id(e) not in recorded]
        if events:
            name = str(getattr(model, "name", "model"))
            records.append(_diagnosed(f"{name}-outside-fit", name, first_index + len(records),
                                      [event_record(e) for e in events], events))
    for optimizer, count in gate_counts.items():
        if count:
            event = {"step": 0, "stage": "outside_fit", "where": optimizer, "check": "finite",
                     "counts": {"updates": float(count)}, "action": "skip"}
            records.append(_diagnosed(f"{optimizer}-outside-fit", optimizer,
                                      first_index + len(records), [event]))
    return records


__all__ = ["events_now", "outside_fit_records"]
