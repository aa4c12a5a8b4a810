"""How much the process's threads waited for a CPU that other processes held.

A step that waits for its batch on a machine whose CPUs are busy elsewhere
is not input-bound: the pipeline's threads were ready and the scheduler ran
something else. Linux counts, per thread, the time spent running and the
time spent runnable but waiting for a CPU (`/proc/self/task/<tid>/schedstat`:
on-CPU nanoseconds, run-queue nanoseconds, slices). `CpuWait.sample()`
reads the sums over the process's threads at most every `PERIOD` seconds
and returns the share of the runnable time spent waiting since the last
reading (`perf/cpu_wait_fraction`): 0.65 for a small regression on a
2-core machine at a load average of 6, 0.75-0.8 with it pinned to one CPU
beside two CPU-bound processes. Where the counters do not exist (not
Linux), it returns `None`.

Example:

>>> clock = iter([0.0, 10.0]).__next__
>>> reads = iter([(100, 0), (300, 200)]).__next__
>>> wait = CpuWait(period=1.0, clock=clock, read=reads)
>>> wait.sample()  # the first reading: nothing to compare with
>>> wait.sample()
0.5
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

PERIOD = 0.25
"""Seconds between two readings of the counters (one reading costs 0.1 to 0.5 ms for the 10 to 20
threads of a small training process: at most 0.2 % of its time)."""

_TASKS = "/proc/self/task"


def thread_times() -> tuple[int, int] | None:
    """`(running_ns, waiting_ns)` summed over the process's threads, or `None` without the counters."""
    running = waiting = 0
    try:
        tids = os.listdir(_TASKS)
    except OSError:
        return None
    found = False
    for tid in tids:
        try:
            with open(f"{_TASKS}/{tid}/schedstat") as handle:
                fields = handle.read().split()
        except OSError:
            continue  # a thread that ended meanwhile
        if len(fields) >= 2:
            found = True
            running += int(fields[0])
            waiting += int(fields[1])
    return (running, waiting) if found else None


class CpuWait:
    """The share of runnable time the process's threads spent waiting for a CPU, sampled.

    Args:
        period: least seconds between two readings. Defaults to `PERIOD`.
        clock: the clock in seconds. Defaults to `time.monotonic`.
        read: `() -> (running_ns, waiting_ns) | None`. Defaults to `thread_times`.
    """

    def __init__(self, period: float = PERIOD, clock: Callable[[], float] = time.monotonic,
                 read: Callable[[], tuple[int, int] | None] = thread_times):
        self.period = period
        self.clock = clock
        self.read = read
        self._last: tuple[float, tuple[int, int]] | None = None
        self.available = True

    def sample(self) -> float | None:
        """The share since the last reading, when `period` seconds passed; else `None`."""
        if not self.available:
            return None
        now = self.clock()
        if self._last is not None and now - self._last[0] < self.period:
            return None
        times = self.read()
        if times is None:
            self.available = False
            return None
        last, self._last = self._last, (now, times)
        if last is None:
            return None
        running = times[0] - last[1][0]
        waiting = times[1] - last[1][1]
        if running < 0 or waiting < 0 or running + waiting <= 0:
            return None  # a thread that ended took its counts along
        return max(0.0, min(1.0, waiting / (running + waiting)))


__all__ = ["PERIOD", "CpuWait", "thread_times"]
