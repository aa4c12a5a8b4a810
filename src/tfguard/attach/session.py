"""`AttachSession`: every `keras.Model.fit` guarded, logged and diagnosed while it is open.

While a session is open, `keras.Model.fit` is replaced at class level (so
`Sequential`, functional and subclassed models, and `tf.keras.Model`, which
is the same class, are all covered; a subclass that overrides `fit` without
calling `super().fit` is not). Each call then:

1. guards the model once (`tfguard.guard`, with the session's policy and
   quarantine folder) unless it is already guarded, or `guard=False`, or
   the environment variable `TFGUARD=0` turns the firewall off;
2. appends to the caller's callbacks a `LiveDiagnosis` and a
   `tfguard.summary.Logger` writing to `<logdir>/<run>`, each only when the
   caller did not already pass one of that class (then the caller's is
   used); and, when the session guarded the model, puts `HideGuardLogs`
   first, so the script's progress bar, callbacks and `History` do not grow
   the guard's `guard_violations` / `guard_skipped` entries;
3. runs the real `fit` with the same arguments, and returns what it returns
   (or raises what it raises);
4. records a `FitRecord`: the run name (`<model name>-fit<index>`, index
   1-based across the session), the `Diagnosis` of the call's signals by the
   same rules as `diagnose_logdir` (also when `fit` raised), and the
   firewall's violations during the call.

Closing the session (also on an exception) puts `keras.Model.fit` back (the
very same object), and puts each model back as it found it: a model the
session instrumented is released (`tfguard.firewall.release`), a model that
was instrumented before has its previous guard setting restored.

The firewall's per-step `GuardWarning`s (policy `"warn"`) are not printed
while the session is open: they are collected in `FitRecord.guard_events`,
announced through `progress` (the first few per run) and written to the
report, so the script's own stderr is not flooded with one warning per step.

Example:

>>> import keras, numpy as np
>>> from tfguard.attach import attached
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)], name="reg")
>>> model.compile(optimizer="sgd", loss="mse")
>>> with attached(logger=False) as session:
...     _ = model.fit(np.ones((16, 3)), np.ones((16, 1)), epochs=2, verbose=0)
>>> [fit.run for fit in session.fits], keras.Model.fit is session.original_fit
(['reg-fit1'], True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import threading
import warnings
from collections.abc import Callable, Mapping

import keras
import tensorflow as tf

from tfguard.attach.fitcall import fit_hparams, run_name, user_callbacks
from tfguard.attach.hidden_logs import HideGuardLogs
from tfguard.attach.stops import EpochEndWatch, successful_exit
from tfguard.diagnose import Diagnosis, LiveDiagnosis, diagnose
from tfguard.errors import ContractError, TfguardError
from tfguard.files import unique_path
from tfguard.findings_table import finding_line
from tfguard.firewall import (
    GuardConfig,
    GuardWarning,
    guard,
    instrument,
    instrumentation_of,
    loop,
    release,
)
from tfguard.firewall.config import enabled_by_environment
from tfguard.firewall.host import EpochTracker
from tfguard.lint.dataset import lint_dataset
from tfguard.lint.failure import failure_record
from tfguard.summary import Logger

DEFAULT_LOGDIR = os.path.join("runs", "attached")
DEFAULT_POLICY = "warn"
EVENT_LINES = 3  # guard events announced through `progress` per run
_ACTIVE = threading.Lock()  # one session at a time: keras.Model.fit is process-wide

DENSE_STEPS = 20
"""Under `tfguard run`, the live diagnosis and the logger observe each of a fit's first 20
steps (then every 10): a run that explodes within a few steps (a far too wide initializer:
NaN at step 4) shows its growth only step by step (issue 22). Both observe the same steps,
so the live and the offline diagnosis agree."""


@dataclasses.dataclass
class FitRecord:
    """One intercepted `fit()` call.

    Args:
        run: the run's name, `<model name>-fit<index>`.
        model: the model's name.
        index: the call's 1-based index in the session.
        diagnosis: the `Diagnosis` of the call's signals, or `None` when no
            live diagnosis could ride along (callbacks given as a
            `CallbackList`) or the diagnosis itself failed (see `notes`).
        guard_events: the firewall's `GuardEvent`s during the call, oldest first.
        run_dir: the folder the session's logger wrote, or `None`.
        guarded: whether the firewall was on for the call.
        error: `"<type>: <message>"` of the exception `fit` raised, or `None`.
        notes: remarks (a callback that could not be added, ...).
    """

    run: str
    model: str
    index: int
    diagnosis: Diagnosis | None = None
    guard_events: list = dataclasses.field(default_factory=list)
    run_dir: str | None = None
    guarded: bool = False
    error: str | None = None
    notes: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _ModelState:
    model: keras.Model
    created: bool
    previous_guard: GuardConfig | None
    guarded: bool = False
    run: str | None = None  # one run per model: its fits continue one training history
    run_dir: str | None = None
    live: object = None  # the session's LiveDiagnosis of this model, kept across its fits
    logger: object = None  # the session's Logger of this model, kept across its fits


class AttachSession:
    """Guards, logs and diagnoses every `keras.Model.fit` call while open.

    Use it as a context manager (`with AttachSession(...) as session:`), or
    call `start()` and later `close()`. Only one session can be open at a
    time in a process.

    Example:

    >>> import keras, numpy as np
    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)], name="net")
    >>> m.compile(optimizer="sgd", loss="mse")
    >>> session = AttachSession(logger=False).start()
    >>> _ = m.fit(np.ones((8, 2)), np.ones((8, 1)), verbose=0)
    >>> session.close()
    >>> [d.run for d in session.diagnoses]
    ['net-fit1']

    Args:
        logdir: the root of the TensorBoard logs; each fit writes
            `<logdir>/<run>` (a `-2`, `-3`, ... suffix when that folder
            exists). Defaults to `"runs/attached"`.
        policy: the firewall's policy, `"raise"`, `"skip"` or `"warn"`.
            Defaults to `"warn"`.
        guard: turn the firewall on. Defaults to `True`.
        logger: add `tfguard.summary.Logger`. Defaults to `True`.
        quarantine_dir: where the firewall saves bad batches. Defaults to
            `None` (`<logdir>/quarantine`).
        forward: the firewall's forward checkpoint, `"output"`, `"layers"` or
            `"off"`. Defaults to `"output"`.
        hparams: extra hyperparameters for every run (e.g. the script's
            name). Defaults to `None`.
        progress: receives one line of text per new symptom and per early
            guard event, while training runs. Defaults to `None`.

    Raises:
        ContractError: for an invalid `policy` or `forward`.
    """

    def __init__(
        self,
        *,
        logdir: str | os.PathLike = DEFAULT_LOGDIR,
        policy: str = DEFAULT_POLICY,
        guard: bool = True,
        logger: bool = True,
        quarantine_dir: str | os.PathLike | None = None,
        forward: str = "output",
        hparams: Mapping | None = None,
        progress: Callable[[str], None] | None = None,
    ):
        GuardConfig(policy=policy, forward=forward)  # validates both, with the house's message
        self.logdir = os.path.abspath(os.fspath(logdir))
        self.policy = policy
        self.guard = bool(guard)
        self.logger = bool(logger)
        self.quarantine_dir = os.path.abspath(
            os.fspath(quarantine_dir) if quarantine_dir is not None
            else os.path.join(self.logdir, "quarantine"))
        self.forward = forward
        self.hparams = dict(hparams or {})
        self.progress = progress
        self.fits: list[FitRecord] = []
        self.notes: list[str] = []
        self.original_fit = None
        self._owned_fit = False
        self._saved_fit = None
        self._wrapper = None
        self._signature = None
        self._models: dict[int, _ModelState] = {}
        self._running: set[int] = set()
        self._current_model = None
        self._gating = False
        self._errors: dict[int, BaseException] = {}
        self._batch_size = None
        self._warnings = None
        self._open = False

    # -- results ------------------------------------------------------------------
    @property
    def diagnoses(self) -> list[Diagnosis]:
        """One `Diagnosis` per run (a model's fits are one run): its last, whole-history one."""
        last: dict[str, Diagnosis] = {}
        for fit in self.fits:
            if fit.diagnosis is not None:
                last.pop(fit.run, None)
                last[fit.run] = fit.diagnosis
        return list(last.values())

    @property
    def guard_events(self) -> list[tuple[str, object]]:
        """`(run, GuardEvent)` for every violation, in order."""
        return [(f.run, e) for f in self.fits for e in f.guard_events]

    @property
    def active(self) -> bool:
        """Whether the session is open (`keras.Model.fit` is patched)."""
        return self._open

    # -- opening and closing ----------------------------------------------------------
    def start(self) -> AttachSession:
        """Patches `keras.Model.fit`; returns the session.

        Raises:
            ContractError: if another `AttachSession` is open.
        """
        if self._open:
            return self
        if not _ACTIVE.acquire(blocking=False):
            raise ContractError(
                "Received a second AttachSession, expected at most one open at a time "
                "(keras.Model.fit is patched for the whole process). Received: a nested start()",
                hint="close the first session before opening another",
            )
        try:
            self._patch()
        except BaseException:
            _ACTIVE.release()
            raise
        self._open = True
        return self

    def _patch(self) -> None:
        owner = keras.Model
        self._owned_fit = "fit" in owner.__dict__
        self._saved_fit = owner.__dict__.get("fit")
        original = owner.fit
        self.original_fit = original
        self._signature = inspect.signature(original)
        session = self

        @functools.wraps(original)
        def fit(model, *args, **kwargs):
            return session._fit(original, model, args, kwargs)

        fit._tfguard_session = self
        self._wrapper = fit
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("ignore", GuardWarning)
        owner.fit = fit
        if self.guard and enabled_by_environment():  # hand-written loops: every optimizer update
            loop.reset_gate_counts()
            loop.gate_optimizers()
            self._gating = True

    def close(self) -> None:
        """Restores `keras.Model.fit` and every model the session touched. Idempotent."""
        if not self._open:
            return
        try:
            owner = keras.Model
            if self._owned_fit:
                owner.fit = self._saved_fit
            elif "fit" in owner.__dict__:
                del owner.fit
            for state in self._models.values():
                if state.logger is not None:  # a fit a callback ended by raising never ended its run
                    with contextlib.suppress(Exception):
                        state.logger.close()
                self._restore(state)
            if self._gating:
                loop.ungate_optimizers()
                self._gating = False
                for name, count in loop.gate_counts().items():
                    if count:
                        self.notes.append(
                            f"{count} update(s) of optimizer '{name}' outside fit (a hand-written "
                            "loop) were rejected: a non-finite gradient or a non-finite result; "
                            "the weights were kept as they were")
        finally:
            self._models.clear()
            self._open = False
            if self._warnings is not None:
                self._warnings.__exit__(None, None, None)
                self._warnings = None
            _ACTIVE.release()

    def __enter__(self) -> AttachSession:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    # -- one fit call -------------------------------------------------------------------
    def _fit(self, original, model, args, kwargs):
        if not self._open or id(model) in self._running:
            return original(model, *args, **kwargs)
        try:
            bound = self._signature.bind(model, *args, **kwargs)
        except TypeError:  # a wrong call: let Keras say what is wrong
            return original(model, *args, **kwargs)
        record = FitRecord(run="", model=str(getattr(model, "name", "model")),
                           index=len(self.fits) + 1)
        state = self._prepare(model, record)
        if state.run is None:  # the model's first fit names its run; later fits continue it
            state.run_dir = (unique_path(self.logdir, run_name(model, record.index))
                             if self.logger else None)
            state.run = os.path.basename(state.run_dir) if state.run_dir else run_name(model, record.index)
        record.run = state.run
        run_dir = state.run_dir
        self.fits.append(record)

        inst = instrument(model)
        record.guarded = inst.guard is not None
        first_event = len(inst.events)
        hparams = {**self.hparams, **fit_hparams(model, bound.arguments)}
        self._current_model = model
        callbacks, live, own_live, logger = self._callbacks(
            record, bound.arguments.get("callbacks"), hparams, run_dir, state)
        watch = EpochEndWatch()
        if callbacks is not None:
            bound.arguments["callbacks"] = [watch.first, *callbacks, watch.last]
        self._lint_pipeline(bound.arguments.get("x"), live, logger, record)
        listener = self._event_listener(record)
        inst.add_event_listener(listener)
        self._running.add(id(model))
        try:
            return original(*bound.args, **bound.kwargs)
        except BaseException as error:
            if successful_exit(error):  # sys.exit(0) in a callback: the script's own clean stop
                self._stopped(record, error, watch, live if own_live else None, logger, state)
                raise
            record.error = f"{type(error).__name__}: {error}"
            self._errors[record.index] = error
            self._batch_size = bound.arguments.get("batch_size")
            raise
        finally:
            self._running.discard(id(model))
            inst.remove_event_listener(listener)
            if own_live:
                live.on_train_end()  # idempotent; Keras skips it when fit raises
            record.guard_events = list(inst.events[first_event:])
            if logger is not None:
                record.run_dir = getattr(logger, "run_path", None) or record.run_dir
            record.diagnosis = self._diagnose(record, live)

    def _stopped(self, record: FitRecord, stop: SystemExit, watch: EpochEndWatch, live,
                 logger, state: _ModelState) -> None:
        """Ends a fit that a callback stopped with `sys.exit(0)` as completed, its last epoch logged.

        The session's own logger and live diagnosis come after the script's
        callbacks, so an exit in the script's `on_epoch_end` kept that epoch
        from them: they get it now, with the logs Keras passed.
        """
        cut = watch.cut_short()
        at = f" at the end of epoch {cut[0]}" if cut is not None else ""
        record.notes.append(f"the script stopped training with sys.exit({stop.code!r}) in a "
                            f"callback{at}: a successful stop")
        ours = logger is not None and logger is state.logger
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

    def _prepare(self, model, record: FitRecord) -> _ModelState:
        """Guards the model once and remembers how to put it back."""
        state = self._models.get(id(model))
        if state is not None:
            return state
        inst = instrumentation_of(model)
        state = _ModelState(model, created=inst is None,
                            previous_guard=inst.guard if inst is not None else None)
        self._models[id(model)] = state
        if self.guard and (inst is None or inst.guard is None):
            try:
                guard(model, policy=self.policy, forward=self.forward,
                      quarantine_dir=self.quarantine_dir)
            except TfguardError as error:  # the training goes on unguarded, as the script wrote it
                record.notes.append(f"the firewall could not guard '{record.model}': {error.message}")
            else:
                current = instrumentation_of(model)
                state.guarded = current is not None and current.guard is not None
        return state

    def _restore(self, state: _ModelState) -> None:
        inst = instrumentation_of(state.model)
        if inst is None:
            return
        if state.created:
            release(state.model)
        elif state.guarded:
            inst.set_guard(state.previous_guard)

    def _callbacks(self, record: FitRecord, given, hparams: dict, run_dir: str | None,
                   state: _ModelState):
        """The callbacks to pass to `fit`, the `LiveDiagnosis` in use, and whether it is ours.

        The session's own live diagnosis and logger of a model are kept across
        its fits: a script that calls `fit(epochs=1)` in a loop gets one
        training history (steps and epochs continue), long enough to diagnose.
        """
        hide = state.guarded
        callbacks = user_callbacks(given)
        if callbacks is None:
            record.notes.append("callbacks were passed as a keras.callbacks.CallbackList: "
                                "no logger or live diagnosis was added to this fit")
            return None, None, False, None
        if hide:  # first, so no callback of the script sees the guard's counters
            callbacks.insert(0, HideGuardLogs())
        inst = instrumentation_of(self._current_model) if self._current_model is not None else None
        if inst is not None and not any(isinstance(c, EpochTracker) for c in callbacks):
            # this first call reached Keras's fit before the model's own fit was wrapped
            callbacks.insert(0, EpochTracker(inst))
        live = next((c for c in callbacks if isinstance(c, LiveDiagnosis)), None)
        own_live = live is None
        if own_live:
            if state.live is None:
                state.live = LiveDiagnosis(run=record.run, hparams=hparams, dense_steps=DENSE_STEPS,
                                           on_finding=self._finding_announcer(record))
            live = state.live
            callbacks.append(live)
        logger = None
        if self.logger:
            logger = next((c for c in callbacks if isinstance(c, Logger)), None)
            if logger is not None:
                record.notes.append("the script passed its own tfguard Logger; it was used as is")
            elif state.logger is not None:
                logger = state.logger
                callbacks.append(logger)
                record.run_dir = run_dir
            else:
                try:  # the session names the run: the logger writes into run_dir itself
                    logger = state.logger = Logger(run_dir, hparams=hparams, run_subdir=False)
                    logger.dense_steps = DENSE_STEPS
                except (TypeError, ValueError, TfguardError) as error:
                    record.notes.append(f"the logger could not be created: {error}")
                else:
                    callbacks.append(logger)
                    record.run_dir = run_dir
        return callbacks, live, own_live, logger

    def _diagnose(self, record: FitRecord, live: LiveDiagnosis | None) -> Diagnosis | None:
        if live is None:
            return None
        try:
            signals = dataclasses.replace(live.recorder.signals(), run=record.run)
            if record.error is not None and signals.status is None:
                signals = dataclasses.replace(signals, status=self._failure(record))
            return diagnose(signals, rules=live.rules, thresholds=live.thresholds)
        except Exception as error:  # the script's result must not depend on the diagnosis
            record.notes.append(f"the diagnosis failed: {type(error).__name__}: {error}")
            return None

    def _lint_pipeline(self, x, live, logger, record: FitRecord) -> None:
        """The static check of the `tf.data` pipeline given to `fit`, for the rules and the log."""
        if not isinstance(x, tf.data.Dataset):
            return
        try:
            findings = lint_dataset(x)
        except Exception as error:  # a pipeline the check cannot read still trains
            record.notes.append(f"the input pipeline could not be checked: {type(error).__name__}")
            return
        if live is not None:
            known = {(f.get("id"), f.get("where")) if isinstance(f, dict) else f.key
                     for f in live.recorder.lint}
            live.recorder.lint.extend(f for f in findings if f.key not in known)
        if logger is not None:
            logger.pipeline_lint = findings

    def _failure(self, record: FitRecord) -> dict:
        state = next((s for s in self._models.values() if s.run == record.run), None)
        inst = instrumentation_of(state.model) if state is not None else None
        error = self._errors.get(record.index)
        if error is None:
            return {"status": "failed", "type": record.error.split(":")[0],
                    "error": record.error, "step": None}
        return failure_record(error, state.model if state is not None else None,
                              step=inst.host_step if inst is not None else None,
                              batch_size=getattr(inst, "last_batch_size", None) or self._batch_size)

    # -- progress lines -------------------------------------------------------------------
    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def _finding_announcer(self, record: FitRecord):
        def announce(finding) -> None:
            self._say(f"tfguard: {record.run}: {finding_line(finding)}")
        return announce

    def _event_listener(self, record: FitRecord):
        seen = [0]

        def on_event(event) -> None:
            seen[0] += 1
            if seen[0] <= EVENT_LINES:
                first_line = event.message.splitlines()[0] if event.message else ""
                self._say(f"tfguard: {record.run}: guard {event.action}: {first_line}")
            elif seen[0] == EVENT_LINES + 1:
                self._say(f"tfguard: {record.run}: more guard violations; all are in the report")
        return on_event


def attached(**options) -> AttachSession:
    """An `AttachSession` to open with `with`.

    Example:

    >>> import keras, numpy as np
    >>> from tfguard.attach import attached
    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> m.compile(optimizer="sgd", loss="mse")
    >>> with attached(logger=False, policy="skip") as session:
    ...     _ = m.fit(np.ones((8, 2)), np.ones((8, 1)), verbose=0)
    >>> len(session.fits)
    1

    Args:
        **options: the keyword arguments of `AttachSession`.

    Returns:
        An `AttachSession`, not yet open.

    Raises:
        ContractError: for an invalid option.
    """
    return AttachSession(**options)


def attach(**options) -> AttachSession:
    """Opens an `AttachSession` now; call `.close()` to detach.

    Example:

    >>> session = attach(logger=False)
    >>> session.active
    True
    >>> session.close()

    Args:
        **options: the keyword arguments of `AttachSession`.

    Returns:
        The open session.

    Raises:
        ContractError: for an invalid option, or if a session is already open.
    """
    return AttachSession(**options).start()


__all__ = ["DEFAULT_LOGDIR", "DEFAULT_POLICY", "AttachSession", "FitRecord", "attach",
           "attached"]
