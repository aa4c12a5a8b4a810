"""A run that resumes from a checkpoint takes its guard counters on from its own event files.

`guard_offsets(directory, start, violations, skipped)` reads the last
`guard/violations` and `guard/skipped` written before step `start` (the
first step this session trains) and returns what to add to this process's
own counts, so the curves go on where the killed session left them instead
of dropping to zero. A process that counted them itself gets `(0, 0)`.

Example:

>>> import tempfile
>>> guard_offsets(tempfile.mkdtemp(), start=100, violations=0, skipped=0)
(0, 0)
"""

from __future__ import annotations

import numpy as np

from tfguard import _tags
from tfguard.events._run import event_files, read_run


def resumed(directory: str | None, step: int) -> bool:
    """Whether a session starting after `step` continues a run already on disk."""
    return step > 0 and directory is not None and bool(event_files(directory))


def guard_offsets(directory: str, start: int, violations: int, skipped: int) -> tuple[int, int]:
    """`(violations, skipped)` to add to this process's counts to continue the run's curves."""
    run = read_run(directory, tags=[_tags.GUARD_VIOLATIONS, _tags.GUARD_SKIPPED], kinds="scalars")
    offsets = []
    for tag, count in ((_tags.GUARD_VIOLATIONS, violations), (_tags.GUARD_SKIPPED, skipped)):
        last = 0
        if tag in run.scalars:
            steps, _, values = run.scalars[tag]
            before = values[steps < start]
            if before.size and np.isfinite(before[-1]):
                last = int(round(float(before[-1])))
        offsets.append(max(0, last - count))  # 0 when this process counted them itself
    return offsets[0], offsets[1]


__all__ = ["guard_offsets", "resumed"]
