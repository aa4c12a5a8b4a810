"""Findings from the firewall's own evidence, stage by stage.

A guarded run's curves stay finite: the bad steps were rejected. What went
wrong is in the firewall's violations (`guard/records`, `guard/events`):
the check stage that failed first, the tensor, the rows of the batch at
fault with a fingerprint of their values, and what the replay localized.
Each stage gets the finding and the fix that fit it:

* **data** (a value check of an input or label: `finite`, `range`, ...):
  `bad_record`, the input or label tensor by name, the examples at fault,
  and whether the same example came back in later batches (the same
  fingerprint: it is in the data, not a transient fault). The fix is in
  the data: find, drop or impute the record. A label outside the classes
  is `label_range`'s (`rules.data`).
* **forward, loss, gradients, update**: `nonfinite` (see `rules.numeric`),
  worded by the stage (the replay's first non-finite layer and op) with
  that stage's fix (`tfguard._findings.STAGE_FIXES`); an overflowing update
  asks for a lower learning rate. A guarded run is never told to run under
  the guard.

Example:

>>> from tfguard.diagnose import Signals, Thresholds
>>> record = {"step": 3, "epoch": 0, "batch": 3, "stage": "data", "where": "x", "check": "finite",
...           "counts": {"nan": 10.0, "total": 640.0}, "action": "skipped",
...           "examples": [{"row": 5, "bad": 10, "values": 10, "fingerprint": "ab12", "earlier": []}]}
>>> again = {**record, "step": 20, "epoch": 1, "batch": 33,
...          "examples": [{"row": 40, "bad": 10, "values": 10, "fingerprint": "ab12",
...                        "earlier": [{"epoch": 0, "batch": 3, "row": 5}]}]}
>>> finding, = bad_record(Signals(guard_events=[record, again]), Thresholds())
>>> finding.id, finding.where, finding.evidence["came_back_in"], finding.evidence["came_back_unit"]
('bad_record', 'x', [0, 1], 'epochs')
"""

from __future__ import annotations

from tfguard._findings import STAGE_FIXES, Finding
from tfguard.diagnose._inputs.signals import MissingSignals, Signals
from tfguard.diagnose._inputs.violations import violations
from tfguard.diagnose._thresholds import Thresholds

LABEL_CHECKS = ("labels", "one_hot", "probabilities")
"""Data checks of labels against the loss: `label_range` reports them."""


def data_events(signals: Signals) -> list[dict]:
    """The violations whose first failed stage is a data check of a record's values.

    Any check of an input (`x`), and a label's (`y`) finiteness; a label
    outside what the loss accepts (its classes, its range) is
    `label_range`'s.
    """
    return [e for e in signals.guard_events
            if e.get("stage") == "data" and e.get("check") not in LABEL_CHECKS
            and (not str(e.get("where", "")).startswith("y") or e.get("check") == "finite")]


def _epochs_of(events: list[dict]) -> dict[str, list]:
    """Fingerprint -> the epochs (or batches, outside `fit`) its example was at fault in, in order."""
    seen: dict[str, list] = {}
    for event in events:
        for row in event.get("examples") or []:
            key = row.get("fingerprint")
            if not key:
                continue
            places = seen.setdefault(key, [])
            for earlier in [*(row.get("earlier") or []), {"epoch": event.get("epoch"), "batch": event.get("batch")}]:
                place = earlier.get("epoch") if earlier.get("epoch") is not None else earlier.get("batch")
                if place not in places:
                    places.append(place)
    return seen


def _counts_text(counts: dict) -> str:
    if {"nan", "posinf", "neginf"} <= set(counts):
        text = f"{int(counts['nan'])} NaN, {int(counts['posinf'])} +Inf, {int(counts['neginf'])} -Inf"
        return text + (f" of {int(counts['total'])} values" if "total" in counts else "")
    if "bad" in counts and "total" in counts:
        return f"{int(counts['bad'])} of {int(counts['total'])} values"
    return ""


def bad_record(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports the records of the data the firewall rejected at its data check.

    Args:
        signals: the run (its `guard_events`).
        thresholds: unused (a rejected record needs no threshold).

    Returns:
        At most one `bad_record` finding: an error when the firewall stopped
        the training (`raise`) or let the batch through (`warn`), a warning when it
        skipped the batches (the weights are safe; every epoch loses those batches).

    Raises:
        MissingSignals: when the run has no structured firewall records.
    """
    del thresholds
    if not signals.guard_events:
        raise MissingSignals("no firewall records: the run was not guarded")
    events = data_events(signals)
    if not events:
        return []
    first = events[0]
    where = str(first.get("where") or "the input")
    checks = sorted({str(e.get("check")) for e in events})
    rows = first.get("examples") or []
    recurring = {key: places for key, places in _epochs_of(events).items() if len(places) > 1}
    what = _counts_text(first.get("counts") or {})
    named = ""
    if rows:
        shown = ", ".join(f"{r['row']} ({r['bad']} of its {r['values']} values)" for r in rows[:3])
        more = f" and {len(rows) - 3} more" if len(rows) > 3 else ""
        named = f" in example{'s' if len(rows) > 1 else ''} {shown}{more} of its batch"
    message = (f"the firewall rejected {len(events)} batch(es) at its data check: '{where}' failed "
               f"'{first.get('check')}'" + (f" ({what})" if what else "") + named + ".")
    unit = "epochs" if first.get("epoch") is not None else "batches"
    if recurring:
        places = next(iter(recurring.values()))
        message += (f" The same example came back in {unit} {', '.join(str(p) for p in places)}: "
                    "it is in your data, not a transient fault.")
    action = str(first.get("action") or "")
    severity = "warning" if all(e.get("action") == "skipped" for e in events) else "error"
    if severity == "warning":
        message += (" The firewall skipped those batches: the weights are safe, but every epoch "
                    "loses the good examples of the batch as well.")
    evidence = {"guard_events": len(events), "checks": checks, "action": action,
                "counts": dict(first.get("counts") or {}),
                "examples": [{k: r.get(k) for k in ("row", "bad", "values", "fingerprint")} for r in rows[:20]],
                "came_back_in": next(iter(recurring.values()), []), "came_back_unit": unit,
                "recurring_examples": len(recurring)}
    step = first.get("step")
    epoch = first.get("epoch") if first.get("epoch") is not None else signals.epoch_of(step)
    return [Finding("bad_record", severity, message, onset_step=step, onset_epoch=epoch, where=where,
                    evidence=evidence, suggestion=STAGE_FIXES["data"])]


def stage_finding(signals: Signals, events: list[dict]) -> Finding:
    """`nonfinite` from violations at a loss, gradient, update or forward stage: what failed and that stage's fix."""
    by_step = {v.step: v for v in violations(signals)}
    first = events[0]
    stage = str(first.get("stage") or "gradients")
    where = str(first.get("where") or "")
    step = first.get("step")
    seen = by_step.get(int(step or 0))
    layer = seen.first_bad_layer if seen is not None else None
    what = _counts_text(first.get("counts") or {})
    stages = sorted({str(e.get("stage")) for e in events})
    message = (f"the firewall caught {len(events)} non-finite step(s) at its {stage} stage, the first at "
               f"step {step}: {where}" + (f" ({what})" if what else "") + ".")
    if layer:
        message += f" On replay the first non-finite layer is '{layer}'."
    message += " The logged curves stayed finite because those updates were not applied."
    evidence = {"guard_events": len(events), "stages": stages, "stage": stage}
    if layer:
        evidence["first_bad_layer"] = layer
    epoch = first.get("epoch") if first.get("epoch") is not None else signals.epoch_of(step)
    return Finding("nonfinite", "warning", message, onset_step=step, onset_epoch=epoch,
                   where=layer or where or None, evidence=evidence, suggestion=STAGE_FIXES[stage])


__all__ = ["LABEL_CHECKS", "bad_record", "data_events", "stage_finding"]
