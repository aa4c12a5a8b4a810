"""`StepQueue`: the values of a run waiting to be written, by step, written in step order.

The Logger gathers what one step produced from several places (the step's
record, a guard event, an invariant check, the epoch end) and writes them
as one event per step, in step order, when it emits: handed to the
writer's thread (`RunWriter.write_later`), so training does not wait for them. Values may be
handed as a generator: it runs in the writer's thread (a histogram step's
protos are made there, not between two training steps). The queue also keeps
the largest step written, where the run's end record goes.

Example:

>>> import tempfile
>>> from tfguard.summary._writers import RunWriter
>>> from tfguard.summary._summary_values import scalar_value
>>> queue = StepQueue()
>>> queue.add(5, [scalar_value("a", 1.0)]); queue.add(3, [scalar_value("b", 2.0)])
>>> writer = RunWriter(tempfile.mkdtemp())
>>> queue.emit(writer), queue.written_step, queue.emit(writer)
([3, 5], 5, [])
>>> writer.close()
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable


class StepQueue:
    """Values waiting to be written, by step."""

    def __init__(self):
        self._pending: dict[int, list[Iterable]] = {}  # step -> the values of each `add`, as handed
        self.written_step = 0
        """The largest step emitted so far."""

    def add(self, step: int, values: Iterable) -> None:
        """Queues summary values at `step` (after those already queued there).

        `values` is kept as it is and read when written: a generator runs in
        the writer's thread, so what it reads must not change until then.
        """
        self._pending.setdefault(int(step), []).append(values)

    def clear(self) -> None:
        """Drops what is queued (a new run starts)."""
        self._pending = {}

    def emit(self, writer, active: bool = True) -> list[int]:
        """Hands what is queued to the writer's thread, one event per step in step order, and empties the queue.

        Args:
            writer: the `RunWriter`.
            active: `False` drops the values (logging stopped). Defaults to `True`.

        Returns:
            The steps written.
        """
        pending, self._pending = self._pending, {}
        if not active or not pending:
            return []
        self.written_step = max(self.written_step, *pending)
        steps = sorted(pending)
        for step in steps:
            writer.write_later(step, itertools.chain.from_iterable(pending[step]))
        return steps


__all__ = ["StepQueue"]
