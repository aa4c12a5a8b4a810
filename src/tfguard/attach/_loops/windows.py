"""What a hand-written loop did since its last optimizer update: one `Window` per traced function, one eagerly.

The optimizer's apply is where a loop's step shows itself, but the loop
computed its loss (and often its metrics) before it: the observations of
`Loss` calls and `Metric` updates wait in the window until the next update
takes them (`Window.take`). A traced function (`tf.function`) is one step
as its graph is built, so each graph has a window of its own: what it
computed before its first update belongs to that update, a metric it
updates after an update is read where it is (`Window.updates`). Eagerly the
window runs from one update to the next; a metric updated more than once
in one eager window is an evaluation's (a validation pass), not the
step's, and stays out from then on (`Window.evaluations`). A graph that
updates nothing (a `test_step`) never hands its observations to anyone.

Example:

>>> windows = Windows()
>>> window = windows.current()
>>> window.add(Observation("loss", source="mse", value=1.0))
>>> [o.kind for o in window.take()], window.take()
(['loss'], [])
"""

from __future__ import annotations

import dataclasses
import weakref

import tensorflow as tf


@dataclasses.dataclass
class Observation:
    """One outermost `Loss` call or `Metric` update of the loop.

    Args:
        kind: `"loss"` or `"metric"`.
        source: the `Loss` or `Metric` object.
        value: the loss value (a tensor), or `None` for a metric (read when recorded).
        y_true: the loss's targets, or `None`.
    """

    kind: str
    source: object
    value: object = None
    y_true: object = None


class Window:
    """The loop's observations since its last update, in one graph (or eagerly).

    Args:
        graph: the traced function's graph, or `None` eagerly.
    """

    def __init__(self, graph=None):
        self.graph = graph
        self.pending: dict[int, Observation] = {}  # id(source) -> its latest observation
        self.calls: dict[int, int] = {}  # id(source) -> its calls in this window
        self.updates = 0  # updates seen in this graph (eagerly: since the window opened)
        self.last_run = None  # the run of the last update in this graph
        self.runs: list = []  # the runs of the updates in this graph
        self.scanned = 0  # operations of the graph already looked at for activations
        self.batch_taken = False  # the graph's batch statistics are taken (at its first update)
        self.schedule = None  # (step, due) of the graph's last recorded update: what a metric after it reads
        self.evaluations: weakref.WeakSet | None = weakref.WeakSet() if graph is None else None

    @property
    def eager(self) -> bool:
        return self.graph is None

    def add(self, observation: Observation) -> None:
        """Keeps an observation until the next update (the latest of each object)."""
        key = id(observation.source)
        self.calls[key] = self.calls.get(key, 0) + 1
        if self.eager and observation.kind == "metric" and self.calls[key] > 1:
            self.evaluations.add(observation.source)  # updated twice between two steps: an evaluation's
        if self.eager and observation.source in self.evaluations:
            self.pending.pop(key, None)
            return
        self.pending.pop(key, None)
        self.pending[key] = observation

    def take(self) -> list[Observation]:
        """The observations waiting for an update, in order; the window starts again (eagerly, a new one)."""
        taken = list(self.pending.values())
        self.pending = {}
        self.calls = {}
        return taken

    def took_update(self, run) -> None:
        """Counts an update of `run` in this window."""
        self.updates += 1
        self.last_run = run
        if run not in self.runs:
            self.runs.append(run)


class Windows:
    """The window of each traced function (kept while its graph lives) and the eager one."""

    def __init__(self):
        self._graphs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._eager = Window()

    def current(self) -> Window:
        """The window of the code running now: the graph being built's, or the eager one."""
        if tf.executing_eagerly():
            return self._eager
        graph = tf.compat.v1.get_default_graph()
        window = self._graphs.get(graph)
        if window is None:
            window = self._graphs[graph] = Window(graph)
        return window

    def eager_window(self) -> Window:
        return self._eager


__all__ = ["Observation", "Window", "Windows"]
