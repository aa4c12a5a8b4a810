"""`StepListener`: what the Logger hears during training (part of `tfguard.summary.Logger`).

The Logger has no batch hook. It subscribes to the model's instrumentation
(`tfguard.instrument`): the recording steps hand it one `StepRecord` each
(signals, batch logs, histograms), at its `scalars_every` and
`histograms_every`; the firewall hands it each violation (a `guard/events`
line, a `guard/records` JSON object and the counters); the invariant watch
hands it each check (`invariants/records`); all three through a
`Listening` (`summary/_listening.py`), as `LiveDiagnosis` hears them. Every
worker subscribes (the workers must run the same step); only the chief writes.

Example (a guarded model's skipped batch is heard as a guard event):

>>> import keras, numpy as np, tempfile, tfguard
>>> from tfguard.events import read_run
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> model = tfguard.guard(model, policy="skip", localize=False, quarantine_dir=None)
>>> x = np.ones((8, 2), "float32"); x[3, 0] = np.nan
>>> logger = tfguard.summary.Logger(tempfile.mkdtemp(), scalars_every=1, invariants=False)
>>> _ = model.fit(x, np.ones((8, 1)), batch_size=2, verbose=0, callbacks=[logger])
>>> len(read_run(logger.run_path).texts["guard/events"])
1
"""

from __future__ import annotations

import json

from tfguard import _tags
from tfguard._findings import strict_json
from tfguard.invariants import watch as invariant_watch
from tfguard.summary import _runinfo
from tfguard.summary._runinfo import guard_event_json, guard_event_line
from tfguard.summary._summary_values import histogram_value, scalar_value, text_value


class StepListener:
    """The step's records, the firewall's events and the invariant checks, queued at their steps."""

    def _listen(self, on: bool) -> None:
        """Subscribes to the step records (every worker does: the workers must run the same step),
        the guard events and, once `_begin_invariants` ran, the invariant checks; or stops."""
        listening = self._listening
        if not on:
            listening.stop()
            return
        listening.on_record = self._on_record if self._wants_signals else None
        listening.dense_steps = self.dense_steps
        listening.step_offset = self.step_offset
        listening.request = {
            "scalars_every": self.scalars_every,
            "histograms_every": self.histograms_every if self.histogram_kinds else 0,
            "histogram_kinds": self.histogram_kinds,
            "weights": bool(self.scalars_every),
            "histogram_filter": self._histogram_filter if self.record_if is not None else None,
        }
        listening.start(self._inst)

    def _histogram_filter(self, step: int) -> bool:
        """`record_if(step)`, asked once per histogram step."""
        return bool(self._guarded(self.record_if, step))

    def _on_record(self, record) -> None:
        """A recording step ended (called by the instrumented step, not by Keras)."""
        if self._training:
            self._guarded(self._record, record)

    def _record(self, record) -> None:
        self._first_batch_values()
        self._step = step = record.step
        step_values = _runinfo.step_values(record, getattr(self.model, "optimizer", None))
        values: list = list(step_values.items())  # (tag, number): written in place (`RunWriter.write`)
        if record.scalars and record.moved:
            values.extend(self._speed.scalars(step))
        if values:
            self._queue.add(step, values)
        if record.histograms:  # made in the writer's thread: a step's record is not changed after it is handed out
            self._queue.add(step, (histogram_value(tag, buckets) for tag, buckets in record.histograms.items()))
        self._emit()

    def _on_guard_event(self, event) -> None:
        if not (self._training and self.active):
            return
        step = int(event.step)
        values = [text_value(_tags.GUARD_EVENTS, guard_event_line(event)),
                  text_value(_tags.GUARD_RECORDS, guard_event_json(event)), *self._guard_counters(step)]
        self._queue.add(step, values)
        self._emit()

    def _begin_invariants(self) -> None:
        """Listens to the model's invariant checks (one watch per model, shared with LiveDiagnosis)."""
        if not self.invariants:
            return
        self._watch = invariant_watch(self.model, step=self._read_step)
        self._listening.hear_invariants(self._watch)
        self._watch.begin_fit(self._next_epoch)

    def _on_invariant(self, record: dict) -> None:
        if self._training and self.active:
            text = text_value(_tags.INVARIANT_RECORDS, json.dumps(strict_json(record)))
            self._queue.add(int(record["step"]), [text])

    def _guard_counters(self, step: int) -> list:
        """The firewall's counters at `step`, unless these very values were queued at it already.

        A skipped last batch of an epoch and the epoch's end share a step
        (the optimizer's iterations do not move on a skipped step): the
        counters are written once there, not twice.
        """
        inst = self._inst
        if inst is None or inst.guard is None:
            return []
        violations, skipped = self._guard_offsets
        counts = (inst.violations + violations, inst.skipped + skipped)
        if self._counters_queued == (step, counts):
            return []
        self._counters_queued = (step, counts)
        return [
            scalar_value(_tags.GUARD_VIOLATIONS, counts[0]),
            scalar_value(_tags.GUARD_SKIPPED, counts[1]),
        ]


__all__ = ["StepListener"]
