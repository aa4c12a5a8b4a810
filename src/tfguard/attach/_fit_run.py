"""`FitRun`: one intercepted `fit()` call, from its callbacks to its diagnosis.

An `AttachSession` makes one `FitRun` per call and forgets it after: what
belongs to one call (its callbacks, the live diagnosis and logger it uses,
its guard-event listener, the error it raised, the batch size it was given)
lives here, not on the session. A run:

1. puts the session's callbacks around the script's: `HideGuardLogs` first
   on a model the session guarded, an `EpochTracker` if Keras's fit was
   reached before the model's own was wrapped, the model's `LiveDiagnosis`
   and `Logger` (kept across its fits) unless the script passed its own,
   and an `EpochEndWatch` at both ends;
2. checks a `tf.data` pipeline given as `x` (`lint_dataset`), for the rules
   and the log;
3. starts a new phase of the model's run when the model was compiled
   again since its last fit (`tfguard.attach._phases`: fine-tuning after
   transfer learning), so its steps go on and each phase is named;
4. runs the real `fit`; a `sys.exit(0)` in a callback ends the run as
   completed, its last epoch logged (`_stopped`); any other exception is
   recorded and raised again;
5. records the guard events of the call and its `Diagnosis`, by the same
   rules as `diagnose_logdir` (also when `fit` raised).

Example (through the session, which is how a run is made):

>>> import keras, numpy as np
>>> from tfguard.attach import attached
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)], name="m")
>>> model.compile(optimizer="sgd", loss="mse")
>>> with attached(logger=False) as session:
...     _ = model.fit(np.ones((8, 2)), np.ones((8, 1)), verbose=0)
...     _ = model.fit(np.ones((8, 2)), np.ones((8, 1)), verbose=0)
>>> [(f.run, f.index, f.diagnosis is not None) for f in session.fits]
[('m-fit1', 1, True), ('m-fit1', 2, True)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import tensorflow as tf

from tfguard._errors import TfguardError
from tfguard._findings_table import finding_header
from tfguard._firewall import instrument, instrumentation_of
from tfguard._firewall.instrument import EpochTracker
from tfguard.attach._fitcall import user_callbacks
from tfguard.attach._hidden_logs import HideGuardLogs
from tfguard.attach._records import FitRecord, ModelState
from tfguard.attach._stops import EpochEndWatch, successful_exit
from tfguard.diagnose import Diagnosis, LiveDiagnosis, diagnose
from tfguard.lint._dataset import lint_dataset
from tfguard.lint._failure import failure_record
from tfguard.lint._outliers import lint_outliers
from tfguard.lint._validation_split import lint_validation_split
from tfguard.summary import Logger

EVENT_LINES = 3  # guard events announced through `progress` per run

DENSE_STEPS = 20
"""Under `tfguard run`, the live diagnosis and the logger observe each of a fit's first 20
steps (then every 10): a run that explodes within a few steps (a far too wide initializer:
NaN at step 4) shows its growth only step by step (issue 22). Both observe the same steps,
so the live and the offline diagnosis agree."""


class FitRun:
    """One `fit()` call under an attach session.

    Args:
        model: the model whose `fit` was called.
        bound: the call's arguments, bound to `keras.Model.fit`'s signature.
        record: the call's `FitRecord` (its run already named).
        state: the model's `ModelState` in the session.
        hparams: the run's hyperparameters (the session's and the call's).
        logger: add the session's `tfguard.summary.Logger`.
        say: receives one progress line (a new symptom, an early guard event).
    """

    def __init__(self, model, bound, record: FitRecord, state: ModelState, *, hparams: dict,
                 logger: bool, say: Callable[[str], None]):
        self.model = model
        self.bound = bound
        self.record = record
        self.state = state
        self.hparams = hparams
        self.wants_logger = logger
        self.say = say
        self.error: BaseException | None = None
        self.batch_size = None
        self.live: LiveDiagnosis | None = None
        self.own_live = False
        self.logger = None

    def run(self, original):
        """Runs the real `fit` with the session's callbacks; returns what it returns."""
        record, model, bound = self.record, self.model, self.bound
        inst = instrument(model)
        record.guarded = inst.guard is not None
        first_event = len(inst.events)
        callbacks = self._callbacks(bound.arguments.get("callbacks"))
        watch = EpochEndWatch()
        if callbacks is not None:
            bound.arguments["callbacks"] = [watch.first, *callbacks, watch.last]
        self._lint_pipeline(bound.arguments.get("x"))
        self._lint_validation_split(bound.arguments)
        self._lint_outliers(bound.arguments.get("x"))
        self._enter_phase()
        listener = self._event_listener()
        inst.add_event_listener(listener)
        try:
            return original(*bound.args, **bound.kwargs)
        except BaseException as error:
            if successful_exit(error):  # sys.exit(0) in a callback: the script's own clean stop
                self._stopped(error, watch)
                raise
            record.error = f"{type(error).__name__}: {error}"
            self.error = error
            self.batch_size = bound.arguments.get("batch_size")
            raise
        finally:
            inst.remove_event_listener(listener)
            if self.own_live:
                self.live.on_train_end()  # idempotent; Keras skips it when fit raises
            record.guard_events = list(inst.events[first_event:])
            if self.logger is not None:
                record.run_dir = getattr(self.logger, "run_path", None) or record.run_dir
            record.diagnosis = self._diagnose()

    def _stopped(self, stop: SystemExit, watch: EpochEndWatch) -> None:
        """Ends a fit that a callback stopped with `sys.exit(0)` as completed, its last epoch logged.

        The session's own logger and live diagnosis come after the script's
        callbacks, so an exit in the script's `on_epoch_end` kept that epoch
        from them: they get it now, with the logs Keras passed.
        """
        record, logger = self.record, self.logger
        live = self.live if self.own_live else None
        cut = watch.cut_short()
        at = f" at the end of epoch {cut[0]}" if cut is not None else ""
        record.notes.append(f"the script stopped training with sys.exit({stop.code!r}) in a "
                            f"callback{at}: a successful stop")
        ours = logger is not None and logger is self.state.logger
        for callback in (logger if ours else None, live):
            if callback is not None and cut is not None:
                try:
                    callback.on_epoch_end(*cut)
                except Exception as error:  # the exit goes on whatever the logs did
                    record.notes.append(f"the last epoch could not be logged: {error}")
        if logger is not None:  # Keras skipped on_train_end; the logger ends the run completed
            try:
                logger.on_train_end()
            except Exception as error:
                record.notes.append(f"the logs could not be closed: {error}")

    def _callbacks(self, given) -> list | None:
        """The callbacks to pass to `fit`; sets the `LiveDiagnosis` and `Logger` in use.

        The session's own live diagnosis and logger of a model are kept across
        its fits: a script that calls `fit(epochs=1)` in a loop gets one
        training history (steps and epochs continue), long enough to diagnose.
        """
        record, state = self.record, self.state
        callbacks = user_callbacks(given)
        if callbacks is None:
            record.notes.append("callbacks were passed as a keras.callbacks.CallbackList: "
                                "no logger or live diagnosis was added to this fit")
            return None
        if state.guarded:  # first, so no callback of the script sees the guard's counters
            callbacks.insert(0, HideGuardLogs())
        inst = instrumentation_of(self.model)
        if inst is not None and not any(isinstance(c, EpochTracker) for c in callbacks):
            # this first call reached Keras's fit before the model's own fit was wrapped
            callbacks.insert(0, EpochTracker(inst))
        live = next((c for c in callbacks if isinstance(c, LiveDiagnosis)), None)
        self.own_live = live is None
        if self.own_live:
            if state.live is None:
                state.live = LiveDiagnosis(run=record.run, hparams=self.hparams,
                                           dense_steps=DENSE_STEPS,
                                           on_finding=self._finding_announcer())
            live = state.live
            callbacks.append(live)
        self.live = live
        if self.wants_logger:
            self.logger = self._logger(callbacks)
        return callbacks

    def _logger(self, callbacks: list):
        """The script's own tfguard Logger, else the model's (made on its first fit), added."""
        record, state = self.record, self.state
        logger = next((c for c in callbacks if isinstance(c, Logger)), None)
        if logger is not None:
            record.notes.append("the script passed its own tfguard Logger; it was used as is")
            return logger
        if state.logger is None:
            try:  # the session names the run: the logger writes into run_dir itself
                state.logger = Logger(state.run_dir, hparams=self.hparams, run_subdir=False)
                state.logger.dense_steps = DENSE_STEPS
            except (TypeError, ValueError, TfguardError) as error:
                record.notes.append(f"the logger could not be created: {error}")
                return None
        callbacks.append(state.logger)
        record.run_dir = state.run_dir
        return state.logger

    def _enter_phase(self) -> None:
        """A model compiled again since its last fit begins a new phase of its run: said to the
        session's logger and live diagnosis, whose steps go on where the last phase ended."""
        phases = self.state.phases
        if not phases.enter(self.model):
            self.record.phase = len(phases.phases)
            return
        self.record.phase = current = len(phases.phases)
        rows = phases.rows()
        last = rows[-1]
        self.record.notes.append(
            f"the model was compiled again: phase {current} of its run starts at step {last['first_step']} "
            f"({last['optimizer']}, learning rate {last['learning_rate']}, "
            f"{last['trainable_variables']} trainable variables)")
        if self.logger is not None and self.logger is self.state.logger:
            self.logger.begin_phase(phases.offset, rows)
        if self.own_live:
            self.live.begin_phase(phases.offset, rows)

    def _lint_pipeline(self, x) -> None:
        """The static check of the `tf.data` pipeline given to `fit`, for the rules and the log."""
        if not isinstance(x, tf.data.Dataset):
            return
        try:
            findings = lint_dataset(x)
        except Exception as error:  # a pipeline the check cannot read still trains
            self.record.notes.append(
                f"the input pipeline could not be checked: {type(error).__name__}")
            return
        if self.live is not None:
            known = {(f.get("id"), f.get("where")) if isinstance(f, dict) else f.key
                     for f in self.live.recorder.lint}
            self.live.recorder.lint.extend(f for f in findings if f.key not in known)
        if self.logger is not None:
            self.logger.pipeline_lint = findings

    def _lint_validation_split(self, arguments) -> None:
        """Classes `validation_split` holds out of in-memory labels that training never holds."""
        if arguments.get("validation_data") is not None or not arguments.get("validation_split"):
            return
        try:
            findings = lint_validation_split(arguments.get("y"), arguments.get("validation_split"))
        except Exception as error:  # labels the check cannot read still train
            self.record.notes.append(f"the validation split could not be checked: {type(error).__name__}")
            return
        self._add_lint(findings)

    def _lint_outliers(self, x) -> None:
        """Input values tens of times the input's own scale, in the in-memory `x` (`lint_outliers`)."""
        try:
            findings = lint_outliers(x)
        except Exception as error:  # inputs the check cannot read still train
            self.record.notes.append(f"the inputs' outliers could not be checked: {type(error).__name__}")
            return
        self._add_lint(findings)

    def _add_lint(self, findings: list) -> None:
        """Hands static findings to the live diagnosis and the logger (once each: a model fitted
        again keeps its live diagnosis and logger)."""
        def new(known: list) -> list:
            keys = {(f.get("id"), f.get("where")) if isinstance(f, dict) else f.key for f in known}
            return [f for f in findings if f.key not in keys]

        if self.live is not None:
            self.live.recorder.lint.extend(new(self.live.recorder.lint))
        if self.logger is not None:
            self.logger.pipeline_lint = [*self.logger.pipeline_lint, *new(self.logger.pipeline_lint)]

    def _diagnose(self) -> Diagnosis | None:
        live, record = self.live, self.record
        if live is None:
            return None
        try:
            signals = dataclasses.replace(live.recorder.signals(), run=record.run)
            if record.error is not None and signals.status is None:
                signals = dataclasses.replace(signals, status=self._failure())
            return diagnose(signals, rules=live.rules, thresholds=live.thresholds)
        except Exception as error:  # the script's result must not depend on the diagnosis
            record.notes.append(f"the diagnosis failed: {type(error).__name__}: {error}")
            return None

    def _failure(self) -> dict:
        """The failure record of the call, as the Logger writes it to `run/status`."""
        if self.error is None:
            record = self.record
            return {"status": "failed", "type": record.error.split(":")[0],
                    "error": record.error, "step": None}
        inst = instrumentation_of(self.model)
        return failure_record(self.error, self.model,
                              step=inst.host_step if inst is not None else None,
                              batch_size=getattr(inst, "last_batch_size", None) or self.batch_size)

    # -- progress lines -------------------------------------------------------------------
    def _finding_announcer(self):
        run = self.record.run

        def announce(finding) -> None:  # what and where; the summary at the end says it in full
            self.say(f"tfguard: {run}: found {finding_header(finding)}")
        return announce

    def _event_listener(self):
        seen = [0]
        run = self.record.run

        def on_event(event) -> None:
            seen[0] += 1
            if seen[0] <= EVENT_LINES:
                first_line = event.message.splitlines()[0] if event.message else ""
                self.say(f"tfguard: {run}: guard {event.action}: {first_line}")
            elif seen[0] == EVENT_LINES + 1:
                self.say(f"tfguard: {run}: more guard violations; all are in the report")
        return on_event


__all__ = ["DENSE_STEPS", "EVENT_LINES", "FitRun"]
