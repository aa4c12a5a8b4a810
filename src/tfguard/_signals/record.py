"""One immutable record per recording step, and the listeners that subscribe to them.

A listener subscribes with its own periods (scalars every N steps,
histograms every M, of the kinds it wants). Before each step the host asks
the bus once what is due (`Bus.due(step)`): nothing, scalars, or scalars
and histograms (the host's flags tell the recording trace; see
`tfguard._firewall.host.HostLoop.key` for which trace runs). After the step
each listener whose period hits gets one `StepRecord` as an argument,
holding only what it asked for. Two listeners asking every 3 and every 10
steps cost what their union costs: steps 0, 3, 6, 9, 10, 12, ...

Example:

>>> bus = Bus()
>>> seen = []
>>> _ = bus.subscribe(lambda record: seen.append(record.step), scalars_every=3)
>>> _ = bus.subscribe(lambda record: None, scalars_every=10)
>>> [step for step in range(12) if bus.due(step)]
[0, 3, 6, 9, 10]
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping

import numpy as np

_EMPTY: Mapping = types.MappingProxyType({})

SCALARS = "scalars"
"""What a step records: its scalar signals."""
HISTOGRAMS = "histograms"
"""What a step records: its histograms (with its scalars)."""
RECORDING = frozenset({SCALARS, HISTOGRAMS})
"""The key of the recording trace: it computes scalars, and histograms when the host says so."""


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """What one recording step measured, handed to each listener as it asked.

    Args:
        step: the global step after the update (the optimizer's iterations;
            unchanged when the step was rejected or dropped).
        batch: the 0-based index of the batch among all batches this model
            trained on (across `fit` calls).
        epoch: the 0-based epoch of `fit`, or `None` outside `fit`.
        moved: whether the step changed the weights.
        scalars: tag -> value.
        histograms: tag -> `[k, 3]` buckets (TensorBoard's layout).
        logs: the step's logs (the metrics Keras shows).
    """

    step: int
    batch: int
    epoch: int | None
    moved: bool
    scalars: Mapping[str, float] = dataclasses.field(default_factory=lambda: _EMPTY)
    histograms: Mapping[str, np.ndarray] = dataclasses.field(default_factory=lambda: _EMPTY)
    logs: Mapping[str, float] = dataclasses.field(default_factory=lambda: _EMPTY)

    @property
    def start(self) -> int:
        """The global step the step started from."""
        return self.step - int(self.moved)

    def only(self, scalars: bool, histogram_kinds: frozenset) -> StepRecord:
        """This record with only the scalars and the histogram kinds given."""
        hists = {t: v for t, v in self.histograms.items() if _kind(t) in histogram_kinds}
        return dataclasses.replace(
            self,
            scalars=self.scalars if scalars else _EMPTY,
            histograms=types.MappingProxyType(hists),
        )


def _kind(tag: str) -> str:
    parts = tag.split("/")
    return parts[1] if len(parts) > 2 else ""


def freeze(values: Mapping) -> Mapping:
    """A read-only copy of a mapping."""
    return types.MappingProxyType(dict(values))


@dataclasses.dataclass
class Subscription:
    """One listener's request.

    Args:
        listener: called with a `StepRecord`.
        scalars_every: scalar signals every this many steps (0: never).
        histograms_every: histograms every this many steps (0: never).
        histogram_kinds: which histograms (`activations`, `gradients`, `weights`).
        weights: also weight norms and update ratios.
        histogram_filter: `filter(step) -> bool` asked once per histogram
            step (the step the summary is written at); `False` skips it.
    """

    listener: Callable[[StepRecord], None]
    scalars_every: int = 0
    histograms_every: int = 0
    histogram_kinds: frozenset = frozenset()
    weights: bool = False
    histogram_filter: Callable[[int], bool] | None = None

    def scalars_due(self, start: int) -> bool:
        return self.scalars_every > 0 and start % self.scalars_every == 0

    def histograms_due(self, start: int) -> bool:
        if not (self.histograms_every > 0 and self.histogram_kinds and start % self.histograms_every == 0):
            return False
        return self.histogram_filter is None or bool(self.histogram_filter(start + 1))


class Bus:
    """The subscriptions of one model; decides once per step what records."""

    def __init__(self):
        self.subscriptions: list[Subscription] = []
        self._due: dict[int, tuple[frozenset, list]] = {}

    def subscribe(self, listener, **request) -> Subscription:
        """Adds (or replaces) `listener`'s subscription; see `Subscription` for the request."""
        self.unsubscribe(listener)
        if "histogram_kinds" in request:
            request["histogram_kinds"] = frozenset(request["histogram_kinds"] or ())
        subscription = Subscription(listener, **request)
        self.subscriptions.append(subscription)
        self._due.clear()
        return subscription

    def unsubscribe(self, listener) -> None:
        self.subscriptions = [s for s in self.subscriptions if s.listener != listener]
        self._due.clear()

    @property
    def histogram_kinds(self) -> frozenset:
        """The union of the histogram kinds asked for."""
        kinds: set = set()
        for s in self.subscriptions:
            if s.histograms_every > 0:
                kinds |= s.histogram_kinds
        return frozenset(kinds)

    @property
    def weights(self) -> bool:
        return any(s.weights for s in self.subscriptions)

    @property
    def wants_signals(self) -> bool:
        return any(s.scalars_every > 0 or (s.histograms_every > 0 and s.histogram_kinds)
                   for s in self.subscriptions)

    def due(self, start: int) -> frozenset:
        """What the step starting at global step `start` records: `{}`, scalars, or both kinds."""
        return self._plan(start)[0]

    def _plan(self, start: int) -> tuple[frozenset, list]:
        cached = self._due.get(start)
        if cached is not None:
            return cached
        deliveries = []
        kinds: set = set()
        for s in self.subscriptions:
            scalars = s.scalars_due(start)
            hists = s.histograms_due(start)
            if scalars or hists:
                deliveries.append((s, scalars, s.histogram_kinds if hists else frozenset()))
                kinds.add(SCALARS)
                if hists:
                    kinds.add(HISTOGRAMS)
        plan = (frozenset(kinds), deliveries)
        self._due = {start: plan}
        return plan

    def deliver(self, record: StepRecord) -> None:
        """Hands `record` to every listener due at the step it started from."""
        for subscription, scalars, hist_kinds in self._plan(record.start)[1]:
            subscription.listener(record.only(scalars, hist_kinds))


__all__ = ["HISTOGRAMS", "RECORDING", "SCALARS", "Bus", "StepRecord", "Subscription", "freeze"]
