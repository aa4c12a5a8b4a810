"""Turn successive diagnoses of a run into events, each said once.

`FindingStream` remembers the open findings of every run, keyed as
`tfguard diagnose` keys a symptom (`Finding.key`: id and layer). Given a
run's new diagnosis it says what is new (`finding`), what changed in an open
finding (`changed`: its severity, onset or root cause; not its message,
whose numbers move with every step), what went away (`resolved`, at the
run's last step) and, once, that a run appeared (`run`) or that the
Logger's end-of-training record arrived (`ended`). A family whose folders
are all gone (`remove`) closes its runs' findings with one `removed` event
per run: they are no longer open, nor counted resolved.

Example:

>>> from tfguard.diagnose import Finding
>>> from tfguard.watch._diagnosis import RunState
>>> def state(*findings, step=10):
...     return RunState("lr_1", "tfguard", findings, {"state": "completed", "text": "ok"},
...                     False, step, None)
>>> plateau = Finding("no_learning", "warning", "the loss is flat.", onset_step=10)
>>> stream = FindingStream()
>>> [e.kind for e in stream.update("lr_1", [state(plateau)], now=0.0)]
['run', 'finding']
>>> [e.kind for e in stream.update("lr_1", [state(plateau, step=20)], now=0.0)]
[]
>>> [(e.kind, e.step) for e in stream.update("lr_1", [state(step=90)], now=0.0)]
[('resolved', 90)]
"""

from __future__ import annotations

from collections.abc import Iterable

from tfguard.diagnose import SYMPTOMS, Finding
from tfguard.watch._diagnosis import RunState
from tfguard.watch._event import WatchEvent

__all__ = ["FindingStream"]

_ENDED_SEVERITY = {"completed": "info", "aborted": "warning"}


def _identity(f: Finding) -> tuple:
    return (f.severity, f.onset_step, f.onset_epoch, f.cause)


class FindingStream:
    """The open findings of every run; `update` says what changed, once."""

    def __init__(self):
        self.open: dict[str, dict[tuple, Finding]] = {}  # run -> key -> finding
        self.runs: dict[str, RunState] = {}
        self._family_runs: dict[str, set[str]] = {}
        self._ended: set[str] = set()
        self.resolved = 0

    def update(self, family: str, states: Iterable[RunState], *, now: float) -> list[WatchEvent]:
        """Takes the new diagnosis of one family of runs; returns the events it makes.

        Args:
            family: the family diagnosed (`tfguard.diagnose.run_family`).
            states: the `RunState` of each of its runs now.
            now: the current time (`time.time()`), stamped on the events.

        Returns:
            The events, run by run; within a run: `run`, new and changed
            findings root cause first, `resolved`, `ended`.
        """
        events: list[WatchEvent] = []
        states = list(states)
        names = {s.run for s in states}
        for gone in sorted(self._family_runs.get(family, set()) - names):
            last = self.runs.pop(gone, None)
            events += self._resolve(gone, self.open.pop(gone, {}), last, now)
        self._family_runs[family] = names
        for state in states:
            events += self._update_run(state, now)
        return events

    def remove(self, family: str, *, now: float) -> list[WatchEvent]:
        """Forgets a family whose folders were deleted; returns a `removed` event per run it had."""
        events = []
        for run in sorted(self._family_runs.pop(family, set())):
            closed = self.open.pop(run, {})
            self.runs.pop(run, None)
            self._ended.discard(run)
            count = f"{len(closed)} open finding(s) closed" if closed else "no open finding"
            events.append(WatchEvent("removed", run, f"run folder removed: {count}",
                                     detail={"closed": [f.id for f in closed.values()]}, time=now))
        return events

    def _update_run(self, state: RunState, now: float) -> list[WatchEvent]:
        events = []
        run = state.run
        if run not in self.runs:
            events.append(WatchEvent("run", run, f"new run ({state.source} log)",
                                     detail={"source": state.source}, time=now))
        self.runs[run] = state
        before = self.open.get(run, {})
        after: dict[tuple, Finding] = {}
        for f in state.findings:
            if f.key in after:  # one event per symptom and layer: the first, as listed
                continue
            after[f.key] = f
            old = before.get(f.key)
            if old is None or _identity(old) != _identity(f):
                events.append(WatchEvent(
                    "finding" if old is None else "changed", run, f.message, severity=f.severity,
                    step=f.onset_step, epoch=f.onset_epoch, finding=f, time=now))
        self.open[run] = after
        gone = {key: f for key, f in before.items() if key not in after}
        events += self._resolve(run, gone, state, now)
        if state.ended and run not in self._ended:
            self._ended.add(run)
            kind = state.status.get("state", "completed")
            events.append(WatchEvent(
                "ended", run, str(state.status.get("text", kind)),
                severity=_ENDED_SEVERITY.get(kind, "error"), step=state.last_step,
                detail={"status": dict(state.status)}, time=now))
        return events

    def _resolve(self, run: str, gone: dict[tuple, Finding], state: RunState | None,
                 now: float) -> list[WatchEvent]:
        events = []
        for f in gone.values():
            self.resolved += 1
            where = f" at {f.where}" if f.where else ""
            since = f", seen since {f.onset_text()}" if f.onset_text() != "-" else ""
            meaning = SYMPTOMS.get(f.id, f.id)
            events.append(WatchEvent(
                "resolved", run, f"no longer found: {f.id}{where} ({meaning}){since}",
                severity=f.severity, step=state.last_step if state else None,
                epoch=state.last_epoch if state else None, finding=f, time=now))
        return events

    def counts(self) -> dict[str, int]:
        """The open findings by severity, e.g. `{"error": 1, "warning": 0, "info": 2}`."""
        found = {"error": 0, "warning": 0, "info": 0}
        for findings in self.open.values():
            for f in findings.values():
                found[f.severity] += 1
        return found
