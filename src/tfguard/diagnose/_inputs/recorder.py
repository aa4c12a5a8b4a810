"""`SignalRecorder`: the in-memory history of a training, as normalized `Signals`.

The live callback feeds it the signals the instrumented train step computes
(`fn(step, signals)` listeners of `tfguard._firewall.instrument`) and the
epoch logs Keras hands to callbacks; `signals()` returns a `Signals` the
same rules read offline. Histogram signals (`[k, 3]` arrays) are kept as
histograms, everything else as scalars.

Example:

>>> from tfguard.diagnose import SignalRecorder
>>> rec = SignalRecorder(run="demo")
>>> rec.add(5, {"grad_norm/dense": 0.3})
>>> rec.end_epoch(0, 10, {"loss": 0.9, "val_loss": 1.0})
>>> s = rec.signals()
>>> s.series("val/loss").steps.tolist(), s.series("grad_norm/dense").epochs.tolist()
([10], [0])
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tfguard import _tags
from tfguard._findings import event_record
from tfguard.diagnose._inputs.signals import Series, Signals, epochs_for


class SignalRecorder:
    """Accumulates signals of one training in memory.

    Args:
        run: the run's name. Defaults to `"live"`.
        model: the model description. Defaults to `None`.
        hparams: the run's hyperparameters. Defaults to `None`.
        lint: static findings. Defaults to `None`.
    """

    def __init__(self, run: str = "live", *, model: dict | None = None,
                 hparams: Mapping | None = None, lint: list | None = None):
        self.run = run
        self.model = model
        self.hparams = dict(hparams or {})
        self.lint = list(lint or [])
        self._scalars: dict[str, tuple[list, list]] = {}
        self._histograms: dict[str, list] = {}
        self._texts: dict[str, list] = {}
        self._ends: list[int] = []
        self._events: list[dict] = []

    def add_scalar(self, tag: str, step: int, value: float) -> None:
        """Records one scalar value of `tag` at global `step`."""
        steps, values = self._scalars.setdefault(tag, ([], []))
        steps.append(int(step))
        values.append(float(value))

    def add(self, step: int, signals: Mapping[str, object]) -> None:
        """Records the signals of one step: floats as scalars, `[k, 3]` arrays as histograms.

        `LiveDiagnosis` feeds it the scalars of each `StepRecord`.

        Args:
            step: the global step.
            signals: tag -> float or ndarray.
        """
        for tag, value in signals.items():
            array = np.asarray(value, dtype=np.float64)
            if array.ndim == 0:
                self.add_scalar(tag, step, float(array))
            elif array.ndim == 2 and array.shape[1] == 3:
                self._histograms.setdefault(tag, []).append((int(step), array))

    def add_text(self, tag: str, step: int, text: str) -> None:
        """Records one text value (e.g. a `guard/events` line)."""
        self._texts.setdefault(tag, []).append((int(step), str(text)))

    def add_event(self, event) -> None:
        """Records a firewall violation (a `GuardEvent`) as evidence for the rules."""
        self._events.append(event_record(event))

    def end_epoch(self, epoch: int, step: int, logs: Mapping[str, object] | None,
                  learning_rate: float | None = None) -> None:
        """Records the epoch-end Keras logs at the step that ended epoch `epoch`.

        `loss` becomes `train/loss`, `val_loss` becomes `val/loss`,
        `learning_rate` becomes `optimizer/learning_rate`.

        Args:
            epoch: the 0-based epoch.
            step: the optimizer's iterations at the end of the epoch.
            logs: the logs Keras passes to `on_epoch_end`.
            learning_rate: the optimizer's learning rate now. Defaults to `None`.
        """
        while len(self._ends) < epoch:  # epochs before an initial_epoch
            self._ends.append(-1)
        if len(self._ends) == epoch:
            self._ends.append(int(step))
        else:
            self._ends[epoch] = int(step)
        for tag, value in _tags.epoch_values(epoch, logs, learning_rate).items():
            self.add_scalar(tag, step, value)

    def signals(self) -> Signals:
        """The history so far as `Signals` (`source="live"`)."""
        ends = np.asarray([e for e in self._ends if e >= 0], dtype=np.int64)
        ends = ends if len(ends) else None
        scalars = {}
        for tag, (steps, values) in self._scalars.items():
            st = np.asarray(steps, dtype=np.int64)
            scalars[tag] = Series(st, np.asarray(values, dtype=np.float64), epochs_for(st, ends))
        return Signals(
            run=self.run, scalars=scalars,
            histograms={t: list(v) for t, v in self._histograms.items()},
            hparams=dict(self.hparams), model=self.model, lint=list(self.lint),
            texts={t: list(v) for t, v in self._texts.items()}, source="live",
            epoch_end_steps=ends, guard_events=list(self._events),
        )
