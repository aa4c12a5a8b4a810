"""`Outbox`: the events waiting for one webhook, most severe first, bounded, least severe dropped first.

Events wait in three lanes, `error`, `warning` and `info`, each in the order
they came. The sender takes the oldest error, else the oldest warning, else
the oldest info, so an endpoint that falls behind gets the errors first;
the watch's summary is taken last, once every lane is empty. When `size`
events wait, the next one makes room by dropping the newest event of the
least severe lane, itself included: an error is never dropped while a
warning or an info waits, and a full outbox of errors keeps the first ones.
Every drop is counted by severity.

Example:

>>> box = Outbox(size=2)
>>> box.put("run a", "info"); box.put("run b", "info"); box.put("nan!", "error")
>>> dict(box.dropped), box.take(timeout=0), box.take(timeout=0)
({'info': 1}, 'nan!', 'run a')
"""

from __future__ import annotations

import collections
import threading

__all__ = ["SEVERITIES", "Outbox"]

SEVERITIES = ("error", "warning", "info")
"""The lanes, the first taken first and dropped last."""


class Outbox:
    """A bounded, thread-safe outbox of one webhook.

    Args:
        size: the most events waiting (the summary not counted). Defaults to `1000`.
    """

    def __init__(self, size: int = 1000):
        self.size = int(size)
        self._lanes = {severity: collections.deque() for severity in SEVERITIES}
        self._last = None
        self._closed = False
        self._ready = threading.Condition()
        self.dropped: collections.Counter = collections.Counter()

    def put(self, item, severity: str) -> None:
        """Adds one event; never blocks (drops the newest of the least severe when full)."""
        lane = severity if severity in self._lanes else "info"
        with self._ready:
            if sum(map(len, self._lanes.values())) >= self.size:
                victim = next(s for s in reversed(SEVERITIES)
                              if self._lanes[s] or s == lane)
                if victim == lane:
                    self.dropped[lane] += 1
                    return
                self._lanes[victim].pop()
                self.dropped[victim] += 1
            self._lanes[lane].append(item)
            self._ready.notify()

    def put_last(self, item) -> None:
        """Sets the item taken once every lane is empty (the summary); never dropped."""
        with self._ready:
            self._last = item
            self._ready.notify()

    def take(self, timeout: float | None = None):
        """The next event (see the module docstring), or `None` after `timeout` seconds or `close`."""
        with self._ready:
            while True:
                for severity in SEVERITIES:
                    if self._lanes[severity]:
                        return self._lanes[severity].popleft()
                if self._last is not None:
                    item, self._last = self._last, None
                    return item
                if self._closed or not self._ready.wait(timeout):
                    return None

    def waiting(self) -> collections.Counter:
        """The events waiting, by severity (the summary counted as `info`)."""
        with self._ready:
            found = collections.Counter({s: len(lane) for s, lane in self._lanes.items() if lane})
            if self._last is not None:
                found["info"] += 1
            return found

    def close(self) -> None:
        """Wakes the sender: `take` returns `None` once nothing waits."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
