"""Follow the event files of one run directory and keep its values, read once, as compact series.

A `RunFollower` owns one `FileFollower` per event file of its directory
(files that appear are followed from their first poll, in the reading order
of `tfguard.events._run.event_files`) and one `tfguard.events._collect.Collector`
that accumulates what they hand it: each scalar tag as three compact arrays
(int64 steps, float64 wall times, float64 values: 24 bytes a point), texts
and hparams. Histograms and images are not kept: no diagnosis rule reads
them, and they are most of a log's bytes. `snapshot()` gives the run as
`tfguard.events.read_run` would read the same bytes (sorted by step, the
last record of a step wins, restarts purged).

A file that shrinks or disappears (rewritten, rotated away) makes the run
start over from its files as they are now; damage already reported is not
reported again, also when the file is read again under a new name (a
rotated `.old` file is the same inode).

All the runs of a watch share one `tfguard.events._budget.TagBudget`
(`watch_budget`: `MAX_WATCHED_TAGS` tags over the logdir, the tags the
rules judge a whole run by exempt), so memory stays bounded however many
runs the logdir holds; a tag refused is reported as damage of its file.

Example:

>>> import os, tempfile
>>> from tensorboard.compat.proto import event_pb2
>>> from tfguard.events._records import frame_record
>>> event = event_pb2.Event(step=10, wall_time=1.0)
>>> _ = event.summary.value.add(tag="train/loss", simple_value=0.5)
>>> run_dir = tempfile.mkdtemp()
>>> with open(os.path.join(run_dir, "events.out.tfevents.1.h"), "wb") as f:
...     _ = f.write(frame_record(event.SerializeToString()))
>>> run = RunFollower(run_dir, "lr_0.1")
>>> run.poll(now=0.0)
(True, [])
>>> run.snapshot().scalars["train/loss"][2].tolist()
[0.5]
>>> run.poll(now=0.0)  # nothing appended: nothing read
(False, [])
"""

from __future__ import annotations

import gc

from tfguard import _tags
from tfguard.events import Run
from tfguard.events._blocks import Block
from tfguard.events._budget import TagBudget
from tfguard.events._collect import Collector
from tfguard.events._records import Damage
from tfguard.events._run import event_files
from tfguard.events._selection import Selection
from tfguard.watch._follow import DEFAULT_SETTLE, ByteCounter, FileFollower, FileRewritten

__all__ = ["KINDS", "MAX_WATCHED_TAGS", "RUN_LEVEL_PREFIXES", "RunFollower", "watch_budget"]

KINDS = ("scalars", "texts", "hparams")
"""What a watched run keeps: what the diagnosis rules read (no histograms, no images)."""

MAX_WATCHED_TAGS = 250_000
"""The most distinct tags a watch keeps over all its runs (about 150 bytes each, plus 24 a point).

Past it, a new per-layer or unknown tag is not read (counted and reported
as damage); the tags of `RUN_LEVEL_PREFIXES` are still read, each run
bounded by `tfguard.events._collect.MAX_TAGS`."""

RUN_LEVEL_PREFIXES = (_tags.TRAIN, _tags.VAL, _tags.BATCH, _tags.OPTIMIZER, _tags.PERF, _tags.DATA,
                      _tags.GUARD, _tags.CONFIG, "run/", "_hparams_/", "epoch_", "batch_", "evaluation_")
"""Tags the rules judge a whole run by (loss, metrics, the firewall, how it ended; Keras's too)."""


def watch_budget() -> TagBudget:
    """The budget the runs of one watch share (`MAX_WATCHED_TAGS`, `RUN_LEVEL_PREFIXES` exempt)."""
    return TagBudget(MAX_WATCHED_TAGS, exempt=RUN_LEVEL_PREFIXES)

_SELECTION = Selection.build(kinds=KINDS)


class RunFollower:
    """The values of one run directory, read as its files grow.

    Args:
        path: the run directory.
        name: the run's name (its path relative to the logdir, `"."` for the logdir).
        settle: seconds a bad spot may stay bad before it is reported.
            Defaults to `tfguard.watch._follow.DEFAULT_SETTLE`.
        counter: counts the bytes read. Defaults to `None` (a new `ByteCounter`).
        budget: the tag budget shared with the watch's other runs. Defaults to
            `None` (a budget of its own, `watch_budget()`).
    """

    def __init__(self, path: str, name: str, *, settle: float = DEFAULT_SETTLE,
                 counter: ByteCounter | None = None, budget: TagBudget | None = None):
        self.path = path
        self.name = name
        self.settle = float(settle)
        self.counter = counter if counter is not None else ByteCounter()
        self.budget = budget if budget is not None else watch_budget()
        self._reported: set[tuple[object, int, str]] = set()
        self.damage: list[Damage] = []  # every damage reported, in order
        self._collector: Collector | None = None
        self._start_over()

    def _start_over(self) -> None:
        self.release()
        self._files: dict[str, FileFollower] = {}
        self._decode_damage: list[Damage] = []
        self._collector = Collector(_SELECTION, self._decode_damage, budget=self.budget)
        self._records = 0

    def release(self) -> None:
        """Gives the run's tags back to the shared budget (the run is read again, or forgotten)."""
        if self._collector is not None:
            self.budget.release(self._collector.charged)
            self._collector.charged = 0

    def poll(self, *, now: float) -> tuple[bool, list[Damage]]:
        """Reads what was appended to the run's files since the last poll.

        Args:
            now: the current time (`time.time()`).

        Returns:
            `(changed, damage)`: whether any record was read, and the damage
            confirmed by this poll (see `tfguard.watch._follow`).
        """
        paths = event_files(self.path)
        if not set(self._files) <= set(paths):  # a file went away: read the run as it is now
            self._start_over()
        try:
            return self._poll(paths, now)
        except FileRewritten:
            self._start_over()
            return self._poll(paths, now)

    def _poll(self, paths: list[str], now: float) -> tuple[bool, list[Damage]]:
        before = self._records
        found: list[Damage] = []
        for path in paths:
            follower = self._files.get(path)
            if follower is None:
                follower = FileFollower(path, settle=self.settle, counter=self.counter)
                self._files[path] = follower
            found.extend(follower.poll(lambda item, path=path: self._add(path, item), now=now))
        self._collector.report_over_cap()  # tags past a cap: said at this poll (--once too)
        found.extend(self._decode_damage)
        self._decode_damage.clear()
        return self._records != before, self._report(found)

    def _report(self, found: list[Damage]) -> list[Damage]:
        new = []
        for d in found:
            # tags past the cap are counted again at each snapshot: said once per file; a file
            # is known by its inode, so one renamed (rotated to `.old`) and read again is not
            follower = self._files.get(d.path)
            file = follower.identity if follower is not None and follower.identity else d.path
            over_cap = d.kind == "oversized" and d.reason.startswith("more than")
            key = (file, -1 if over_cap else d.offset, d.kind)
            if key not in self._reported:
                self._reported.add(key)
                new.append(d)
        self.damage.extend(new)
        return new

    def _add(self, path: str, item) -> None:
        try:
            self._feed(path, item)
        except BufferError:  # a snapshot's view of a series is still alive somewhere
            gc.collect()
            self._feed(path, item)

    def _feed(self, path: str, item) -> None:
        if isinstance(item, Block):
            self._collector.add_block(path, item)
            self._records += len(item.offsets)
        else:
            offsets, datas = item
            self._collector.add(path, offsets, datas)
            self._records += len(offsets)

    def snapshot(self) -> Run:
        """The run as read so far, shaped as `tfguard.events.read_run` returns it.

        Its scalar arrays are views of the follower's buffers: drop the
        snapshot before the next `poll`.

        Returns:
            A `tfguard.events.Run` (no histograms, no images; `damage` holds the
            damage reported so far).
        """
        values = self._collector.finish()  # tags over the cap: damage the next poll reports
        return Run(name=self.name, path=self.path, damage=list(self.damage),
                   files=list(self._files), **values)
