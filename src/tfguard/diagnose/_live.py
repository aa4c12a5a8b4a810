"""`LiveDiagnosis`: the diagnosis rules as a Keras callback, reporting at the epoch a symptom appears.

At the end of every epoch the callback runs the same pure rules as
`diagnose_logdir` over the training's in-memory history and reports each
new symptom (a new `(id, where)`) once: it is appended to `.findings`, its
epoch to `.reported_epoch`, and `on_finding(finding)` is called. With
`stop_on_error=True`, an error-severity finding sets `model.stop_training`.

The history holds the epoch logs Keras hands to callbacks and, when the
model is instrumented (`tfguard._firewall.instrument`, the default), the
per-step signals the guarded train step computes on schedule: gradient
norms, zero-gradient, dead and saturated fractions, input and label
statistics. Signals are computed once, in the graph; the callback only
listens. The invariant checks of a correct program (`tfguard.invariants`:
after the first step and at epoch ends) reach the rules the same way, as
`invariants/records` in the history. Rules whose signals are absent are listed in
`diagnosis.rules_skipped`.

Example:

>>> import keras, numpy as np
>>> from tfguard.diagnose import LiveDiagnosis
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
>>> model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
>>> live = LiveDiagnosis(instrument=False)
>>> _ = model.fit(np.ones((32, 3)), np.ones((32, 1)), epochs=5, verbose=0, callbacks=[live])
>>> [(f.id, live.reported_epoch[f.key]) for f in live.findings]
[('no_learning', 3)]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping

import keras

from tfguard import _tags
from tfguard._findings import Finding, severity_rank, strict_json
from tfguard._firewall import instrument as instrument_model
from tfguard._optimizer_state import learning_rate, model_step
from tfguard.diagnose._engine import Diagnosis, diagnose
from tfguard.diagnose._inputs.recorder import SignalRecorder
from tfguard.diagnose._rules import Rule
from tfguard.diagnose._thresholds import Thresholds
from tfguard.invariants import watch as invariant_watch
from tfguard.lint._describe import applying_optimizer, describe_model, describe_optimizer
from tfguard.summary._listening import Listening
from tfguard.summary._runinfo import step_values


def _describe(model) -> dict | None:
    try:
        return describe_model(model)
    except Exception:  # a model the description cannot read is diagnosed without it
        return None


class LiveDiagnosis(keras.callbacks.Callback):
    """Diagnoses a training while it runs.

    Args:
        rules: rule ids or `Rule` objects. Defaults to `None` (all rules).
        thresholds: a `Thresholds` or a mapping of overrides. Defaults to `None`.
        stop_on_error: set `model.stop_training` when an error-severity
            symptom appears. Defaults to `False`.
        on_finding: called with each new `Finding` when it is first reported.
            Defaults to `None`.
        instrument: listen to the per-step signals of the instrumented train
            step (`tfguard._firewall.instrument(model)`, attached if needed).
            Defaults to `True`.
        scalars_every: the steps between two signal observations asked of
            the instrumented step. Defaults to `10`.
        dense_steps: the first this many recording steps observe every
            step, then every `scalars_every`: a run that explodes within a
            few steps (a far too wide initializer: NaN at step 4) shows its
            growth only step by step (`tfguard run` asks for 20, and its
            logger observes the same steps). `0` observes every
            `scalars_every` from the start. Defaults to `0`.
        run: the run's name in reports. Defaults to `"live"`.
        hparams: hyperparameters to show in reports. Defaults to `None`.
        lint: static findings (e.g. of the input pipeline) to report.
            Defaults to `None`.
        invariants: run the invariant checks of a correct program
            (`tfguard.invariants._watch`, shared with a `Logger`). Defaults to `True`.

    Raises:
        ContractError: for an unknown rule id or threshold name (at the first epoch end).
    """

    def __init__(
        self,
        *,
        rules: Iterable[str | Rule] | None = None,
        thresholds: Thresholds | Mapping | None = None,
        stop_on_error: bool = False,
        on_finding: Callable[[Finding], None] | None = None,
        instrument: bool = True,
        scalars_every: int = 10,
        dense_steps: int = 0,
        run: str = "live",
        hparams: Mapping | None = None,
        lint: list | None = None,
        invariants: bool = True,
    ):
        super().__init__()
        self.invariants = bool(invariants)
        self._watch = None
        if int(scalars_every) < 1:
            raise ValueError(
                "Received an invalid value for `scalars_every`, expected a positive integer. "
                f"Received: scalars_every={scalars_every}"
            )
        self.rules = None if rules is None else list(rules)
        self.thresholds = Thresholds.resolve(thresholds)
        self.stop_on_error = stop_on_error
        self._on_finding = on_finding
        self.instrument = instrument
        self.scalars_every = int(scalars_every)
        self.dense_steps = max(0, int(dense_steps))
        self._listening = Listening(self._on_record, self._on_guard_event, self._on_invariant,
                                    dense_steps=self.dense_steps, scalars_every=self.scalars_every)
        self.run = run
        self.recorder = SignalRecorder(run, hparams=hparams, lint=lint)
        self.findings: list[Finding] = []
        self.reported_epoch: dict[tuple, int] = {}
        self.diagnosis: Diagnosis | None = None
        self._inst = None
        self._next_epoch = 0
        self._describe_again = False  # a subclassed model unbuilt at train begin: described at an epoch's end

    # -- wiring ------------------------------------------------------------------
    def set_model(self, model):
        super().set_model(model)
        if self.instrument and self._inst is None:
            self._inst = instrument_model(model)
            self._listening.start(self._inst)

    @property
    def step_offset(self) -> int:
        """Added to the optimizer's step everywhere: the steps of the run's earlier training phases."""
        return self._listening.step_offset

    def begin_phase(self, step_offset: int, phases: list[dict]) -> None:
        """The next fit starts a new training phase (the model was compiled again): its steps go
        on from `step_offset`, and the history holds `config/phases` (one dict per phase)."""
        self._listening.step_offset = int(step_offset)
        self.recorder.add_text(_tags.CONFIG_PHASES, self.step_offset,
                               json.dumps(strict_json([dict(p) for p in phases])))

    def _on_record(self, record) -> None:
        self.recorder.add(record.step, step_values(record, getattr(self.model, "optimizer", None)))

    def _on_guard_event(self, event) -> None:
        self.recorder.add_text(_tags.GUARD_EVENTS, event.step, event.message)
        self.recorder.add_event(event)

    def _on_invariant(self, record: dict) -> None:
        self.recorder.add_text(_tags.INVARIANT_RECORDS, int(record["step"]),
                               json.dumps(strict_json(record)))

    def _step(self) -> int:
        step = self._inst.global_step() if self._inst is not None else model_step(self.model)
        return step + self.step_offset

    # -- callback hooks ------------------------------------------------------------
    def on_train_begin(self, logs=None):
        if self.recorder.model is None:
            self.recorder.model = _describe(self.model)
            # a subclassed model is built by its first step: describe it again at the epoch's
            # end, when what it does with its inputs (ids or numbers) can be read
            self._describe_again = not self.model.built
        if self._inst is not None and self.model.train_function is None:
            self.model.make_train_function()
        if self.invariants:
            self._watch = invariant_watch(self.model, step=self._step)
            self._listening.hear_invariants(self._watch)
            self._watch.begin_fit(self._next_epoch)

    def on_epoch_end(self, epoch, logs=None):
        # fits of one model continue one history: fit(epochs=1) in a loop is epoch 0, 1, 2, ...
        epoch = max(int(epoch), self._next_epoch)
        self._next_epoch = epoch + 1
        if self._describe_again and self.model.built:
            self._describe_again = False
            self.recorder.model = _describe(self.model) or self.recorder.model
        applying = applying_optimizer(self.model)
        if self.recorder.model is not None and applying is not getattr(self.model, "optimizer", None):
            # a custom train_step applied its own optimizer, not the one compile() gave the model
            self.recorder.model = {**self.recorder.model, "optimizer": describe_optimizer(applying)}
        if self._watch is not None:
            self._watch.end_epoch(epoch)
        self.recorder.end_epoch(epoch, self._step(), logs, learning_rate(applying))
        self.diagnosis = diagnose(self.recorder.signals(), rules=self.rules,
                                  thresholds=self.thresholds)
        for finding in self.diagnosis.findings:
            if finding.key in self.reported_epoch:
                index = next(i for i, f in enumerate(self.findings) if f.key == finding.key)
                if severity_rank(finding.severity) <= severity_rank(self.findings[index].severity):
                    continue
                self.findings[index] = finding  # a suspect that the symptoms now confirm
            else:
                self.reported_epoch[finding.key] = epoch
                self.findings.append(finding)
            self.on_finding(finding)
            if self.stop_on_error and finding.severity == "error":
                self.model.stop_training = True

    def on_train_end(self, logs=None):
        self._listening.stop()
        self._inst = None

    def on_finding(self, finding: Finding) -> None:
        """Called once per new symptom; calls the `on_finding` argument. Override to react."""
        if self._on_finding is not None:
            self._on_finding(finding)
