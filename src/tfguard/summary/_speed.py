"""Steps per second as a user means it: training time only, from compiled steps on.

`SpeedMeter` counts from a mark set after the first steps of a `fit` (their
traces compile there) and leaves out time paused in validation; each
`scalars(step)` answers the speed since the last call and marks again.

Example:

>>> meter = SpeedMeter()
>>> meter.scalars(10)  # no mark yet: nothing to say
[]
>>> meter.mark(10)
>>> [value.tag for value in meter.scalars(20)]
['perf/steps_per_second']
"""

from __future__ import annotations

import time

from tfguard import _tags
from tfguard.summary._summary_values import scalar_value


class SpeedMeter:
    """Training steps per second between marks, without paused (validation) time."""

    def __init__(self):
        self._mark: tuple[int, float] | None = None
        self._paused = 0.0

    def reset(self) -> None:
        """Forgets the mark (a new `fit`: its first steps compile again)."""
        self._mark = None
        self._paused = 0.0

    def mark(self, step: int) -> None:
        """Counts from `step`, now."""
        self._mark = (step, time.perf_counter())
        self._paused = 0.0

    def pause(self, seconds: float) -> None:
        """Leaves `seconds` (spent outside training, e.g. validating) out of the next figure."""
        self._paused += seconds

    def scalars(self, step: int) -> list:
        """`perf/steps_per_second` since the mark (none before one), and marks `step`."""
        values = []
        now = time.perf_counter()
        if self._mark is not None:
            first, since = self._mark
            elapsed = now - since - self._paused
            if step > first and elapsed > 0:
                values.append(scalar_value(_tags.STEPS_PER_SECOND, (step - first) / elapsed))
        self._mark = (step, now)
        self._paused = 0.0
        return values


__all__ = ["SpeedMeter"]
