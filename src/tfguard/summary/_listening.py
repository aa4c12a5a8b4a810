"""`Listening`: the one way the Logger and `LiveDiagnosis` hear a training.

A listener hears three things from a model's instrumentation and its
invariant watch: the recording steps' `StepRecord`s on its schedule (every
step for its first `dense_steps` records, then every `scalars_every`), the
firewall's violations (`GuardEvent`s, before the policy acts) and the
invariant checks (dicts). `Listening` subscribes and unsubscribes all three
together and hands each on in the run's steps: a record and an event carry
the optimizer's step plus `step_offset`, the steps of the run's earlier
training phases (a model compiled again counts from 0).

Example:

>>> import keras, numpy as np, tfguard
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> steps = []
>>> listening = Listening(lambda record: steps.append(record.step), scalars_every=4, dense_steps=2)
>>> listening.step_offset = 100
>>> listening.start(tfguard.instrument(model))
>>> _ = model.fit(np.ones((16, 2)), np.ones((16, 1)), batch_size=1, verbose=0)
>>> listening.stop()
>>> steps  # two steps one by one, then every 4th from there
[101, 102, 105, 109, 113]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


class Listening:
    """A listener's subscriptions to one model: step records, guard events and invariant checks.

    Args:
        on_record: called with each `StepRecord` (its step in the run's steps);
            `None`: no step records (a Logger that asked for no signal).
        on_guard_event: called with each `GuardEvent` (its step in the run's
            steps). Defaults to `None`.
        on_invariant: called with each invariant check record. Defaults to `None`.
        dense_steps: the first this many records come at every step.
        **request: the step records' schedule, as `Instrumentation.subscribe`
            takes it (`scalars_every`, `histograms_every`, `histogram_kinds`,
            `weights`, `histogram_filter`).
    """

    def __init__(self, on_record: Callable | None, on_guard_event: Callable | None = None,
                 on_invariant: Callable | None = None, *, dense_steps: int = 0, **request):
        self.on_record = on_record
        self.on_guard_event = on_guard_event
        self.on_invariant = on_invariant
        self.dense_steps = max(0, int(dense_steps))
        self.request = request
        self.records = 0  # records heard, over every start
        self.step_offset = 0  # the steps of the run's earlier training phases
        self._inst = None
        self._watch = None

    def start(self, inst) -> None:
        """Subscribes to the step records and guard events of `inst` (an `Instrumentation`, or `None`).

        Called again (a later fit), it subscribes anew with the schedule
        and callbacks as they are now.
        """
        self._stop_records()
        self._inst = inst
        if inst is not None:
            if self.on_record is not None:
                self._subscribe()
            if self.on_guard_event is not None:
                inst.add_event_listener(self._heard_event)

    def hear_invariants(self, watch) -> None:
        """Hands `on_invariant` each check of `watch` (an invariant watch) until `stop`."""
        if self._watch is not None:
            self._watch.remove_listener(self.on_invariant)
        self._watch = watch
        watch.add_listener(self.on_invariant)

    def stop(self) -> None:
        """Unsubscribes from everything `start` and `hear_invariants` subscribed to."""
        self._stop_records()
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.remove_listener(self.on_invariant)

    def _stop_records(self) -> None:
        inst, self._inst = self._inst, None
        if inst is not None:
            inst.unsubscribe(self._heard_record)
            inst.remove_event_listener(self._heard_event)

    def _subscribe(self) -> None:
        request = dict(self.request)
        if self.records < self.dense_steps and request.get("scalars_every"):
            request["scalars_every"] = 1
        self._inst.subscribe(self._heard_record, **request)

    def _heard_record(self, record) -> None:
        self.records += 1
        if self.records == self.dense_steps and self._inst is not None:
            self._subscribe()  # the first steps were heard one by one: back to the schedule
        if self.step_offset:
            record = dataclasses.replace(record, step=int(record.step) + self.step_offset)
        self.on_record(record)

    def _heard_event(self, event) -> None:
        if self.step_offset:
            event = dataclasses.replace(event, step=int(event.step) + self.step_offset)
        self.on_guard_event(event)


__all__ = ["Listening"]
