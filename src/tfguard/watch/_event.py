"""`WatchEvent`: one thing `tfguard watch` says, on the terminal, as a JSON line, to a webhook.

Kinds (`KINDS`): `run` (a run appeared), `finding` (a new finding),
`changed` (an open finding's severity, onset or cause changed), `resolved`
(a finding went away, e.g. a plateau that ended), `damage` (an event file
that stopped growing while damaged), `ended` (the Logger's
end-of-training record: completed, failed, out of memory, aborted) and
`removed` (the run's folder is gone: its open findings are closed, not
resolved).

A JSON line is schema `tfguard.watch/1` (a field may be added within a
version, never renamed or removed)::

    {"schema": "tfguard.watch/1",
     "event": "run" | "finding" | "changed" | "resolved" | "damage" | "ended" | "removed"
              | "summary",
     "time": "2026-12-04T14:02:03Z",   # when the watch saw it (UTC)
     "run": str, "severity": "info" | "warning" | "error",
     "step": int | null, "epoch": int | null,   # the finding's onset; where it went away
     "text": str,                      # one sentence, tfguard diagnose's words
     "finding": {...} | null,          # Finding.to_dict(), as in tfguard.report/1
     "detail": {...}}                  # damage: path, offset, kind; ended: the status;
                                       # run: source

Example:

>>> from tfguard.diagnose import Finding
>>> f = Finding("nonfinite", "error", "'train/loss' became NaN at step 40.", onset_step=40)
>>> event = WatchEvent("finding", "lr_10", f.message, severity="error", step=40, finding=f)
>>> doc = event.to_json()
>>> doc["event"], doc["run"], doc["step"], doc["finding"]["id"]
('finding', 'lr_10', 40, 'nonfinite')
"""

from __future__ import annotations

import dataclasses
import time

from tfguard._findings import strict_json
from tfguard.diagnose import Finding

__all__ = ["KINDS", "SCHEMA", "WatchEvent", "iso_time"]

SCHEMA = "tfguard.watch/1"
KINDS = ("run", "finding", "changed", "resolved", "damage", "ended", "removed")


def iso_time(seconds: float) -> str:
    """`seconds` since the epoch as an ISO 8601 UTC time, e.g. `"2026-12-04T14:02:03Z"`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@dataclasses.dataclass(frozen=True)
class WatchEvent:
    """One event of the watch.

    Args:
        kind: one of `KINDS`.
        run: the run's name, as `tfguard diagnose` names it.
        text: one sentence: the finding's message, the damage, the status.
        severity: `"info"`, `"warning"` or `"error"`. Defaults to `"info"`.
        step: the global step it refers to (a finding's onset). Defaults to `None`.
        epoch: the 0-based epoch it refers to. Defaults to `None`.
        finding: the finding, for `finding`, `changed` and `resolved`. Defaults to `None`.
        detail: more fields (damage: `path`, `offset`, `kind`; ended: the
            status; run: `source`). Defaults to `{}`.
        time: when the watch saw it (`time.time()`). Defaults to `0.0`.
    """

    kind: str
    run: str
    text: str
    severity: str = "info"
    step: int | None = None
    epoch: int | None = None
    finding: Finding | None = None
    detail: dict = dataclasses.field(default_factory=dict)
    time: float = 0.0

    def to_json(self) -> dict:
        """The event as a strict-JSON dict of schema `tfguard.watch/1`."""
        return strict_json({
            "schema": SCHEMA, "event": self.kind, "time": iso_time(self.time), "run": self.run,
            "severity": self.severity, "step": self.step, "epoch": self.epoch, "text": self.text,
            "finding": self.finding.to_dict() if self.finding is not None else None,
            "detail": dict(self.detail),
        })
