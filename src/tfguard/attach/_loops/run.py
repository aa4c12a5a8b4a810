"""`LoopRun`: one hand-written loop's run on the host: its values by step, its log, its diagnosis.

The interception of the optimizer's apply hands a run what a recording update measured
(`receive`: the step, whether the update moved the weights, and values by
key); the run gathers a step's values from its updates (a GAN's two),
and, once a later step arrives, writes them (`tfguard.summary.LoopLog`)
and keeps them for the diagnosis (`SignalRecorder`), as a `Logger` and a
`LiveDiagnosis` do for a fit. Keys become the Logger's tags there:

* the loss a `Loss` object computed before an update is `batch/loss`; in a
  run of several optimizers (a GAN), `batch/<name>_loss`, named by the
  update it fed (`discriminator_loss`), which the loss rules, as for a
  fit's GAN, leave to the players;
* the gradient norms of the updates of one step add up to
  `grad_norm/global`; in a run of several optimizers each also gets
  `optimizer/grad_norm/<name>`;
* the targets of a run of several optimizers are the loop's own (a GAN's
  real/fake labels, smoothed with noise), not data: no `data/label_*`;
* an update that did not move its optimizer's step was rejected by the
  firewall's gate: a guard event (`guard/events`, `guard/records`, the
  counters) at the step, no batch values.

`close()` writes what is left and `run/status`, and returns the run's
`FitRecord` with the `Diagnosis` of what it kept, by the same rules as any
run.

Example:

>>> import keras
>>> adam = keras.optimizers.Adam()
>>> run = LoopRun("mlp-loop", logdir=None, hparams={})
>>> run.add_optimizer(adam, "mlp", [])
>>> run.receive(1, True, [LossKey(adam), "grad_norm/global"], [2.3, 0.5], adam)
>>> run.receive(2, True, [LossKey(adam)], [2.1], adam)
>>> record = run.close(index=1)
>>> record.run, record.diagnosis.signals.series("batch/loss").values.tolist()
('mlp-loop', [2.3, 2.1])
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types

import tensorflow as tf

from tfguard import _tags
from tfguard._files import unique_path
from tfguard._firewall import GuardEvent
from tfguard._optimizer_state import learning_rate
from tfguard.attach._records import FitRecord
from tfguard.diagnose import SignalRecorder, diagnose
from tfguard.lint._failure import end_record
from tfguard.summary._loop_log import LoopLog
from tfguard.summary._runinfo import guard_event_json, guard_event_line

_LABELS = (_tags.LABEL_MIN, _tags.LABEL_MAX, _tags.LABEL_ROW_SUM_MAX)


@dataclasses.dataclass(frozen=True)
class LossKey:
    """The loss computed before an update of `optimizer` (its tag depends on the run's optimizers)."""

    optimizer: object


class LoopRun:
    """One loop run: an optimizer set and the models it trains.

    Args:
        name: the run's name (`<models>-loop`); its folder is `<logdir>/<name>` (`-2`, ... when taken).
        logdir: the log root, or `None` for no event files.
        hparams: the run's hyperparameters.
        config: more rows of its `config/hparams` table. Defaults to `None`.
    """

    def __init__(self, name: str, *, logdir: str | None, hparams: dict, config: dict | None = None,
                 dense_steps: int = 0, every: int = 10):
        self.name = name
        self.dense_steps = int(dense_steps)
        self.every = int(every)
        self.optimizers: list = []
        self._variables: dict[int, object] = {}
        self._trains: dict[int, list] = {}  # id(optimizer) -> the models it trains
        self.labels: dict[int, str] = {}  # id(optimizer) -> its name in tags
        self.models: list = []
        self.description: dict | None = None
        self.notes: list[str] = []
        self.recorder = SignalRecorder(name, hparams=hparams)
        self.config = dict(config or {})  # rows of config/hparams, as they are at the first write
        self.log = None
        if logdir is not None:
            self.log = LoopLog(lambda: unique_path(logdir, self.name, create=True),
                               hparams=hparams, config=self.config)
        self._pending: dict[int, list] = {}  # step -> [(key, value, optimizer)]
        self._rejected: dict[int, int] = {}  # id(optimizer) -> rejected updates recorded
        self._texts: dict[int, list] = {}
        self._described = False
        self._violations = 0
        self._skipped = 0
        self.last_step = 0
        self.open = True

    # -- membership ---------------------------------------------------------------
    @property
    def counting(self):
        """The optimizer whose updates count the run's steps: the first seen."""
        return self.optimizers[0] if self.optimizers else None

    def add_optimizer(self, optimizer, label: str, models: list) -> None:
        """Adds an optimizer (and the models it trains) to the run."""
        if all(o is not optimizer for o in self.optimizers):
            self.optimizers.append(optimizer)
            self.labels[id(optimizer)] = label
            self._trains[id(optimizer)] = list(models)
            with tf.init_scope():  # the rate as it is, also while a function traces
                rates = [learning_rate(o) for o in self.optimizers]
            self.config["optimizers"] = ", ".join(
                f"{type(o).__name__} '{o.name}' (learning rate {rate:.4g})" if rate is not None
                else f"{type(o).__name__} '{o.name}'" for o, rate in zip(self.optimizers, rates))
        for model in models:
            if all(m is not model for m in self.models):
                self.models.append(model)
                self.add_variables(model.trainable_variables)

    def add_variables(self, variables) -> None:
        """Variables the run's updates write (they name the layers of the activations)."""
        for variable in variables:
            self._variables.setdefault(id(variable), variable)

    def variables(self) -> list:
        """Every variable the run's models hold or its updates wrote."""
        return list(self._variables.values())

    def models_of(self, optimizer) -> list:
        """The models `optimizer` trains."""
        return self._trains.get(id(optimizer), [])

    @property
    def naming(self):
        """What names the layers in tags (`probes.layer_key`): the one model (its own name left out), else nothing."""
        return types.SimpleNamespace(name=self.models[0].name if len(self.models) == 1 else "")

    # -- values ---------------------------------------------------------------------
    def receive(self, step: int, moved: bool, keys: list, values, optimizer) -> None:
        """What one recording update measured, at the global `step` after it (see the module)."""
        if not self.open:
            return
        try:
            step = int(step)
            for done in [s for s in self._pending if s < step]:
                self._flush(done)
            if not moved:
                self._reject(step, optimizer)
                return
            entry = self._pending.setdefault(step, [])
            entry.extend((key, float(value), optimizer) for key, value in zip(keys, values))
        except Exception as error:  # what tfguard records never costs the script its run
            self._note(f"a recorded step could not be kept: {type(error).__name__}: {error}")

    def _reject(self, step: int, optimizer) -> None:
        name = str(getattr(optimizer, "name", optimizer))
        self._rejected[id(optimizer)] = self._rejected.get(id(optimizer), 0) + 1
        self._event(GuardEvent(
            step, "outside_fit", name,
            f"an update of optimizer '{name}' at step {step} had a non-finite gradient or result: the "
            "firewall's gate rolled it back (the weights and the optimizer's state are as before it)",
            {"updates": 1.0}, "skipped", check="finite"))

    def _event(self, event: GuardEvent) -> None:
        self._violations += 1
        self.recorder.add_event(event)
        self.recorder.add_text(_tags.GUARD_EVENTS, event.step, event.message)
        self._texts.setdefault(int(event.step), []).extend(
            [(_tags.GUARD_EVENTS, guard_event_line(event)), (_tags.GUARD_RECORDS, guard_event_json(event))])
        self._skipped += event.action == "skipped"

    def add_events(self, events) -> None:
        """Adds violations another firewall saw in this loop (a `guard_step`'s), written at their steps."""
        for event in events:
            self._event(event)

    def _tag(self, key) -> str:
        if isinstance(key, LossKey):
            if len(self.optimizers) < 2:
                return _tags.batch("loss")
            return _tags.batch(f"{self.labels.get(id(key.optimizer), 'optimizer')}_loss")
        return key

    def _flush(self, step: int) -> None:
        entry = self._pending.pop(step, [])
        scalars: dict[str, float] = {}
        squares = 0.0
        for key, value, optimizer in entry:
            if key == _tags.GLOBAL_GRAD_NORM:
                squares += value * value
                if len(self.optimizers) > 1:
                    scalars.setdefault(_tags.optimizer_grad_norm(self.labels.get(id(optimizer), "optimizer")), value)
                continue
            if len(self.optimizers) > 1 and str(key).startswith(_LABELS):
                continue  # an adversarial run's targets are made by the loop (a GAN's noisy ones), not data
            scalars.setdefault(self._tag(key), value)
        if any(key == _tags.GLOBAL_GRAD_NORM for key, _, _ in entry):
            scalars[_tags.GLOBAL_GRAD_NORM] = math.sqrt(squares)
        if scalars:
            rate = learning_rate(self.counting)
            if rate is not None:
                scalars[_tags.LEARNING_RATE] = rate
        self._write(step, scalars)

    def _write(self, step: int, scalars: dict) -> None:
        texts = self._texts.pop(step, [])
        if texts:
            scalars = {**scalars, _tags.GUARD_VIOLATIONS: float(self._violations),
                       _tags.GUARD_SKIPPED: float(self._skipped)}
        if not scalars and not texts:
            return
        self.recorder.add(step, scalars)
        self.last_step = max(self.last_step, step)
        if self.log is None:
            return
        if not self._described and self.description is not None:
            self._described = True
            self.log.describe(step, self.description_json())
        self.log.write(step, scalars, texts)

    def description_json(self) -> str | None:
        """The model description as the JSON `config/model` holds."""
        try:
            return json.dumps(self.description, default=str, sort_keys=True)
        except (TypeError, ValueError):
            return None

    # -- the end --------------------------------------------------------------------
    def rejected(self, optimizer) -> int:
        """How many of `optimizer`'s rejected updates the run has recorded."""
        return self._rejected.get(id(optimizer), 0)

    def add_rejected(self, optimizer, count: int) -> None:
        """Records `count` more rejected updates of `optimizer` no recording update saw (at the last step)."""
        for _ in range(count):
            self._reject(self.last_step, optimizer)

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def close(self, index: int, guarded: bool = False) -> FitRecord:
        """Writes what is left and `run/status`; returns the run's record with its diagnosis."""
        if self.open:
            for step in sorted({*self._pending, *self._texts}):
                self._pending.setdefault(step, [])
                self._flush(step)
            self.open = False
            if self.log is not None:
                if not self._described and self.description is not None:
                    self._described = True
                    self.log.describe(self.last_step, self.description_json())
                self.log.end(end_record("success", self.last_step))
        self.recorder.run = self.name if self.log is None or self.log.path is None else os.path.basename(self.log.path)
        self.recorder.model = self.description
        try:
            diagnosis = diagnose(self.recorder.signals())
        except Exception as error:  # the script's result must not depend on the diagnosis
            self._note(f"the diagnosis failed: {type(error).__name__}: {error}")
            diagnosis = None
        model = "+".join(str(getattr(m, "name", "model")) for m in self.models) or \
            "+".join(self.labels.values())
        return FitRecord(run=self.recorder.run, model=model, index=index, diagnosis=diagnosis,
                         run_dir=self.log.path if self.log is not None else None, guarded=guarded,
                         notes=list(self.notes), kind="loop")


__all__ = ["LoopRun", "LossKey"]
