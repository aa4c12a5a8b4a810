"""Follow every run under a log directory: runs and files that appear are picked up.

`LogdirFollower.poll` lists the run directories (`tfguard.events.find_runs`:
every directory that directly holds a `*tfevents*` file, tfguard's Logger
layout and the stock Keras callback's `train/` and `validation/` alike), gives
each new one a `tfguard.watch._runs.RunFollower`, and polls them all. Listing
costs a directory walk; reading costs the bytes appended.

Example:

>>> import os, tempfile
>>> from tensorboard.compat.proto import event_pb2
>>> from tfguard.events._records import frame_record
>>> logdir = tempfile.mkdtemp()
>>> follower = LogdirFollower(logdir)
>>> follower.poll(now=0.0)
([], [])
>>> os.makedirs(os.path.join(logdir, "run_a"))
>>> event = event_pb2.Event(step=1, wall_time=1.0)
>>> _ = event.summary.value.add(tag="train/loss", simple_value=0.5)
>>> with open(os.path.join(logdir, "run_a", "events.out.tfevents.1.h"), "wb") as f:
...     _ = f.write(frame_record(event.SerializeToString()))
>>> follower.poll(now=0.0)
(['run_a'], [])
>>> sorted(follower.snapshot(["run_a"]))
['run_a']
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from tfguard.events import Run, find_runs
from tfguard.events._records import Damage
from tfguard.watch._follow import DEFAULT_SETTLE, ByteCounter
from tfguard.watch._runs import RunFollower, watch_budget

__all__ = ["LogdirFollower"]


class LogdirFollower:
    """Every run of one log directory, followed as it grows.

    Args:
        logdir: the folder TensorBoard would be pointed at.
        settle: seconds a bad spot may stay bad before it is reported.
            Defaults to `tfguard.watch._follow.DEFAULT_SETTLE`.
        counter: counts the bytes read. Defaults to `None` (a new `ByteCounter`).
    """

    def __init__(self, logdir: str | os.PathLike, *, settle: float = DEFAULT_SETTLE,
                 counter: ByteCounter | None = None):
        self.logdir = os.fspath(logdir)
        self.settle = float(settle)
        self.counter = counter if counter is not None else ByteCounter()
        self.budget = watch_budget()  # the distinct tags all runs keep together
        self._runs: dict[str, RunFollower] = {}
        self.removed: list[str] = []  # the runs the last poll found gone

    @property
    def names(self) -> list[str]:
        """The runs found so far, sorted."""
        return sorted(self._runs)

    def poll(self, *, now: float) -> tuple[list[str], list[tuple[str, Damage]]]:
        """Finds new runs and reads what every run's files got since the last poll.

        Args:
            now: the current time (`time.time()`).

        Returns:
            `(changed, damage)`: the runs that got new records, and
            `(run, Damage)` for each damage confirmed by this poll. The runs
            whose folder went away are dropped and listed in `removed`.

        Raises:
            EventFileError: if `logdir` does not exist or is not a directory.
        """
        present = find_runs(self.logdir)
        self.removed = sorted(set(self._runs) - set(present))
        for name in self.removed:  # its folder (or every event file in it) was deleted
            self._runs.pop(name).release()
        for name in present:
            if name not in self._runs:
                path = os.path.normpath(os.path.join(self.logdir, name))
                self._runs[name] = RunFollower(path, name, settle=self.settle,
                                               counter=self.counter, budget=self.budget)
        changed, damage = [], []
        for name in sorted(self._runs):
            grew, found = self._runs[name].poll(now=now)
            if grew:
                changed.append(name)
            damage.extend((name, d) for d in found)
        return changed, damage

    def snapshot(self, names: Iterable[str]) -> dict[str, Run]:
        """The named runs as read so far (see `RunFollower.snapshot`), in name order."""
        return {name: self._runs[name].snapshot() for name in sorted(names) if name in self._runs}
