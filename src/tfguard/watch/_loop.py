"""The polling loop of `tfguard watch`: poll, say what is new, sleep the rest of the interval.

`Watcher.poll` is one look at the logdir: it reads what every event file got
since the last look (`tfguard.watch._logdir`), diagnoses again the runs that
got new records (`tfguard.watch._diagnosis`) and returns the events that
makes (`tfguard.watch._stream`), damage first. `watch_logdir` repeats it
every `interval` seconds, hands each event to the outputs (terminal, JSON
lines, webhook: `tfguard.watch._outputs`), and stops on `once`, at the first
event as bad as `exit_on` (exit status 1), or on Ctrl-C or SIGTERM (a
scheduler's stop; status 0); the outputs then say a one-line summary. A finding is so reported within one
interval (plus the time of one poll) of the flush of the record that shows it.

Example:

>>> import tempfile
>>> result = watch_logdir(tempfile.mkdtemp(), once=True)
>>> result.exit_code, result.reason, result.polls
(0, 'once', 1)
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from tfguard._errors import ContractError, EventFileError
from tfguard._findings import severity_rank
from tfguard.diagnose import Thresholds, run_family
from tfguard.diagnose._inputs.normalize import damage_note
from tfguard.watch._diagnosis import diagnose_families
from tfguard.watch._event import SCHEMA, WatchEvent, iso_time
from tfguard.watch._follow import DEFAULT_SETTLE, ByteCounter
from tfguard.watch._logdir import LogdirFollower
from tfguard.watch._stream import FindingStream

__all__ = ["DEFAULT_INTERVAL", "EXIT_ON", "UNDELIVERED_EXIT", "WatchResult", "Watcher", "watch_logdir"]

DEFAULT_INTERVAL = 5.0
"""Seconds between two looks at the logdir (5 s)."""
EXIT_ON = ("error", "warning")
UNDELIVERED_EXIT = 3
"""The exit status of a watch that stopped on its own terms but could not deliver every event to a webhook."""
_STOPPING_KINDS = ("finding", "changed", "damage", "ended")


@dataclasses.dataclass
class WatchResult:
    """How a watch went, for its summary line and exit status.

    Args:
        exit_code: `1` when it stopped at an event as bad as `exit_on`, else
            `UNDELIVERED_EXIT` (3) when an output could not deliver every event, else `0`.
        reason: why it stopped: `"once"`, `"exit_on"`, `"interrupted"` (Ctrl-C),
            `"terminated"` (SIGTERM) or `"polls"`.
        polls: the looks taken.
        seconds: how long it watched.
        bytes_read: the bytes read from event files, all polls together.
        runs: the runs seen.
        open: the open findings by severity.
        resolved: the findings that went away.
        events: the events said.
        stopped_by: the event that stopped it, with `exit_on`.
        undelivered: the events the outputs could not deliver (webhooks).
    """

    exit_code: int = 0
    reason: str = ""
    polls: int = 0
    seconds: float = 0.0
    bytes_read: int = 0
    runs: int = 0
    open: dict = dataclasses.field(default_factory=dict)
    resolved: int = 0
    events: int = 0
    stopped_by: WatchEvent | None = None
    undelivered: int = 0

    def summary(self) -> str:
        """One line: what was watched, what is open, why it stopped.

        Example:

        >>> WatchResult(reason="interrupted", polls=3, seconds=9.5, runs=2,
        ...             open={"error": 1, "warning": 0, "info": 0}).summary()
        'tfguard watch: interrupted after 3 polls in 9.5 s; 2 runs, 1 finding open (1 error), 0 resolved, 0 B read'
        """
        counts = {k: v for k, v in self.open.items() if v}
        total = sum(counts.values())
        detail = f" ({', '.join(f'{v} {k}' for k, v in counts.items())})" if total else ""
        why = {"once": "one pass", "exit_on": "stopped at the first finding asked for",
               "interrupted": "interrupted", "terminated": "terminated",
               "polls": "done"}.get(self.reason, self.reason)
        lost = f", {self.undelivered} event(s) not delivered" if self.undelivered else ""
        return (f"tfguard watch: {why} after {self.polls} poll{'s' if self.polls != 1 else ''} "
                f"in {self.seconds:.1f} s; {self.runs} run{'s' if self.runs != 1 else ''}, "
                f"{total} finding{'s' if total != 1 else ''} open{detail}, {self.resolved} "
                f"resolved, {_size(self.bytes_read)} read{lost}")


    def to_json(self) -> dict:
        """The summary as the last `tfguard.watch/1` line (`"event": "summary"`)."""
        return {"schema": SCHEMA, "event": "summary", "time": iso_time(time.time()),
                "text": self.summary(), "reason": self.reason, "exit_code": self.exit_code,
                "polls": self.polls, "seconds": round(self.seconds, 3),
                "bytes_read": self.bytes_read, "runs": self.runs, "open": dict(self.open),
                "resolved": self.resolved, "events": self.events, "undelivered": self.undelivered}


def _size(count: int) -> str:
    for unit in ("B", "kB", "MB"):
        if count < 1000 or unit == "MB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} GB"  # pragma: no cover


class Watcher:
    """One logdir, looked at poll by poll.

    Example:

    >>> import tempfile
    >>> Watcher(tempfile.mkdtemp()).poll()
    []

    Args:
        logdir: the folder TensorBoard would be pointed at.
        settle: seconds a damaged spot may stay bad before it is reported.
            Defaults to `tfguard.watch._follow.DEFAULT_SETTLE`.
        thresholds: the rules' thresholds (a `Thresholds` or overrides).
            Defaults to `None` (the documented defaults, as `tfguard diagnose`).
    """

    def __init__(self, logdir: str | os.PathLike, *, settle: float = DEFAULT_SETTLE,
                 thresholds: Thresholds | Mapping | None = None):
        self.logdir = os.fspath(logdir)
        self.counter = ByteCounter()
        self.follower = LogdirFollower(self.logdir, settle=settle, counter=self.counter)
        self.stream = FindingStream()
        self.thresholds = Thresholds.resolve(thresholds)
        self.root_name = os.path.basename(os.path.normpath(self.logdir)) or "."
        self.last_timing = {"read_s": 0.0, "diagnose_s": 0.0}  # seconds of the last poll

    def poll(self, now: float | None = None) -> list[WatchEvent]:
        """One look: reads what is new, diagnoses the runs that changed.

        Args:
            now: the current time. Defaults to `None` (`time.time()`).

        Returns:
            The events of this look: damage first, then run by run.

        Raises:
            EventFileError: if the logdir does not exist (yet) or is not a directory.
        """
        now = time.time() if now is None else now
        began = time.perf_counter()
        changed, damage = self.follower.poll(now=now)
        read = time.perf_counter()
        events = [WatchEvent(
            "damage", self.root_name if run == "." else run,
            damage_note(d), severity="warning",
            detail={"path": d.path, "offset": d.offset, "kind": d.kind}, time=now)
            for run, d in damage]
        remaining = {run_family(name) for name in self.follower.names}
        gone = {run_family(name) for name in self.follower.removed}
        families = sorted({run_family(name) for name in changed} | (gone & remaining))
        states = diagnose_families(self.follower, families, root_name=self.root_name,
                                   thresholds=self.thresholds)
        for fam in families:
            events += self.stream.update(fam, states.get(fam, []), now=now)
        for fam in sorted(gone - remaining):  # every folder of the run deleted
            events += self.stream.remove(fam, now=now)
        self.last_timing = {"read_s": read - began, "diagnose_s": time.perf_counter() - read}
        return events


def _stop_on_sigterm(flag: list) -> Callable[[], None]:
    """Makes SIGTERM (a scheduler's stop) end the watch as Ctrl-C does; returns the undo.

    Only in the main thread (signal handlers can be set nowhere else).
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def on_term(signum, frame):
        flag.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    return lambda: signal.signal(signal.SIGTERM, previous)


def _stops(event: WatchEvent, exit_on: str | None) -> bool:
    return (exit_on is not None and event.kind in _STOPPING_KINDS
            and severity_rank(event.severity) >= severity_rank(exit_on))


def _check(interval: float, exit_on: str | None, settle: float) -> None:
    if not _finite(interval) or not interval > 0:
        raise ContractError(
            "Received an invalid value for `interval`, expected a finite number of seconds > 0 "
            f"between two looks at the logdir. Received: interval={interval!r}")
    if exit_on is not None and exit_on not in EXIT_ON:
        raise ContractError(
            f"Received an invalid value for `exit_on`, expected one of {EXIT_ON} or None. "
            f"Received: exit_on={exit_on!r}")
    if not _finite(settle) or settle < 0:
        raise ContractError(
            "Received an invalid value for `settle`, expected a finite number of seconds >= 0 a "
            f"damaged spot may stay bad before it is reported. Received: settle={settle!r}")


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def watch_logdir(
    logdir: str | os.PathLike,
    *,
    interval: float | None = DEFAULT_INTERVAL,
    once: bool = False,
    exit_on: str | None = None,
    settle: float | None = DEFAULT_SETTLE,
    outputs: Iterable = (),
    thresholds: Thresholds | Mapping | None = None,
    max_polls: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> WatchResult:
    """Watches a log directory until stopped; says each new finding once.

    Args:
        logdir: the folder TensorBoard would be pointed at (it may not exist
            yet, unless `once`: then the watch waits for it).
        interval: seconds between two looks; `None` for the default.
            Defaults to `DEFAULT_INTERVAL` (5).
        once: one look, then stop (for cron). Defaults to `False`.
        exit_on: `"error"` or `"warning"`: stop with exit code 1 at the first
            finding (or damage, or failed end) at least that bad. Defaults to `None`.
        settle: seconds a damaged spot may stay bad before it is reported;
            `None` for the default. Defaults to `tfguard.watch._follow.DEFAULT_SETTLE` (150).
        outputs: objects with `start(logdir, interval)`, `emit(event)`,
            `notice(text)` and `finish(result)` (`tfguard.watch._outputs`);
            `finish` may return how many events it could not deliver. They
            finish last first, so the first (the printing one) says the
            others' count in the summary. Defaults to `()`.
        thresholds: the rules' thresholds. Defaults to `None` (as `tfguard diagnose`).
        max_polls: stop after this many looks. Defaults to `None` (no limit).
        sleep: waits between looks. Defaults to `time.sleep`.

    Returns:
        The `WatchResult` (its `exit_code` is the command's exit status:
        1 at `exit_on`, else `UNDELIVERED_EXIT` when an event was not
        delivered, else 0).

    Raises:
        EventFileError: with `once`, if `logdir` does not exist or is not a directory.
        ContractError: for an invalid `interval`, `exit_on` or `settle`.
    """
    interval = DEFAULT_INTERVAL if interval is None else interval
    settle = DEFAULT_SETTLE if settle is None else settle
    _check(interval, exit_on, settle)
    outputs = list(outputs)
    watcher = Watcher(logdir, settle=settle, thresholds=thresholds)
    result = WatchResult()
    started = time.monotonic()
    for out in outputs:
        out.start(watcher.logdir, None if once else interval)
    terminated: list = []
    restore = _stop_on_sigterm(terminated)
    try:
        try:
            _poll_until_stopped(watcher, outputs, result, once=once, exit_on=exit_on,
                                interval=interval, max_polls=max_polls, sleep=sleep)
        except KeyboardInterrupt:
            result.reason = "terminated" if terminated else "interrupted"
        result.seconds = time.monotonic() - started
        result.bytes_read = watcher.counter.total
        result.runs = len(watcher.stream.runs)
        result.open = watcher.stream.counts()
        result.resolved = watcher.stream.resolved
        for out in reversed(outputs):  # webhooks wait for their queue; the printer says the count
            result.undelivered += out.finish(result) or 0
        if result.undelivered and result.exit_code == 0:
            result.exit_code = UNDELIVERED_EXIT
    finally:
        restore()  # after the outputs finish: SIGTERM while webhooks drain stops the wait
    return result


def _poll_until_stopped(watcher: Watcher, outputs: list, result: WatchResult, *, once: bool,
                        exit_on: str | None, interval: float, max_polls: int | None,
                        sleep: Callable[[float], None]) -> None:
    """Polls, hands each event to the outputs, sleeps; sets `result.reason` when it stops."""
    waiting = False
    while True:
        began = time.monotonic()
        try:
            events = watcher.poll()
        except EventFileError as error:
            if once:
                raise
            events = []
            if not waiting:
                waiting = True
                for out in outputs:
                    out.notice(f"waiting for the log directory: {error.message}")
        result.polls += 1
        for event in events:
            result.events += 1
            for out in outputs:
                out.emit(event)
            if _stops(event, exit_on):
                result.exit_code, result.reason, result.stopped_by = 1, "exit_on", event
                return
        if once:
            result.reason = "once"
            return
        if max_polls is not None and result.polls >= max_polls:
            result.reason = "polls"
            return
        sleep(max(0.0, interval - (time.monotonic() - began)))
