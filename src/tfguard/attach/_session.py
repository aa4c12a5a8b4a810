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

A loop that never calls `fit` (a `GradientTape` loop, eager or in a
`tf.function`, `train_on_batch`, a step wrapped with `tfguard.guard_step`)
is recorded at its optimizer's updates and its `Loss` and `Metric` calls
while the session is open (`tfguard.attach._loops`): one run per model or
optimizer set (`<model>-loop`), logged as a fit is and diagnosed at
`close()`. What the firewall rejected outside any run (an optimizer no
loop run holds) is a run of its own, with its diagnosis
(`tfguard.attach._outside_fit`): a rejected update is never silent.
It (also on an exception) puts `keras.Model.fit` back (the
very same object), and puts each model back as it found it: a model the
session instrumented is released (`tfguard._firewall.release`), a model that
was instrumented before has its previous guard setting restored.

The firewall's per-step `GuardWarning`s (policy `"warn"`) are not printed
while the session is open: they are collected in `FitRecord.guard_events`,
announced through `progress` (the first few per run) and written to the
report, so the script's own stderr is not flooded with one warning per step.

The session patches and restores `fit` and names each model's run; one
call's work (callbacks, listeners, error, diagnosis) is a `FitRun`
(`tfguard.attach._fit_run`), and what it does to each model and keeps of it
is a `ModelState` (`tfguard.attach._records`).

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
import functools
import inspect
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Mapping

import keras

from tfguard import _seam
from tfguard._errors import ContractError
from tfguard._files import unique_path
from tfguard._firewall import GuardConfig, GuardWarning, loop
from tfguard._firewall.config import enabled_by_environment
from tfguard.attach._fit_run import DENSE_STEPS, FitRun
from tfguard.attach._fitcall import fit_hparams, run_name
from tfguard.attach._loops.recorder import LoopRecorder
from tfguard.attach._outside_fit import events_now, outside_fit_records
from tfguard.attach._records import FitRecord, ModelState, restore_model, take_model
from tfguard.diagnose import Diagnosis

DEFAULT_LOGDIR = os.path.join("runs", "attached")
DEFAULT_POLICY = "warn"
_ACTIVE = threading.Lock()  # one session at a time: keras.Model.fit is process-wide
_STATE = "_tfguard_attach_state"
"""Where a model the session took keeps its `ModelState` while the session is open."""


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
        forward: the firewall's forward stage, `"output"`, `"layers"` or
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
        self._wrapper = None
        self._signature = None
        self._models: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id -> a model it took
        self._events_before: dict[int, int] = {}  # violations each guarded model held at start()
        self._running: set[int] = set()
        self._gating = False
        self._loops: LoopRecorder | None = None
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
        self._events_before = events_now()
        self._open = True
        return self

    def _patch(self) -> None:
        owner = keras.Model
        original = owner.fit
        self.original_fit = original
        self._signature = inspect.signature(original)
        session = self

        @functools.wraps(original)
        def fit(model, *args, **kwargs):
            return session._fit(original, model, args, kwargs)

        self._wrapper = fit
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("ignore", GuardWarning)
        _seam.replace(owner, "fit", fit)
        if self.guard and enabled_by_environment():  # hand-written loops: every optimizer update
            loop.reset_gate_counts()
            loop.gate_optimizers()
            self._gating = True
        # added after the gate: it sees each update before and after the gate wrote or rejected it
        self._loops = LoopRecorder(logdir=self.logdir if self.logger else None, hparams=self.hparams,
                                   guarded=self._gating, dense_steps=DENSE_STEPS).start()

    def close(self) -> None:
        """Restores `keras.Model.fit` and every model the session touched. Idempotent."""
        if not self._open:
            return
        try:
            _seam.restore(keras.Model, "fit", self._wrapper)
            # train_on_batch, a hand-written loop: a run of its own, recorded at its updates
            looped = set()
            if self._loops is not None:
                looped = {o.name for o in self._loops.optimizers}
                self.fits.extend(self._loops.close(first_index=len(self.fits) + 1))
                self._loops = None
            # what the firewall rejected outside any run is a run too
            counts = {name: n for name, n in (loop.gate_counts() if self._gating else {}).items()
                      if name not in looped}
            self.fits.extend(outside_fit_records(self.fits, counts, len(self.fits) + 1, self._events_before))
            for model in list(self._models.values()):
                state = _seam.take_off(model, _STATE)
                if state is None:  # taken off by hand since: nothing of this session's is left on it
                    continue
                if state.logger is not None:  # a fit a callback ended by raising never ended its run
                    with contextlib.suppress(Exception):
                        state.logger.close()
                restore_model(state)
            if self._gating:
                loop.ungate_optimizers()
                self._gating = False
        finally:
            if self._loops is not None:  # closed above unless something before it raised
                self._loops.close()
                self._loops = None
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
        self.fits.append(record)
        hparams = {**self.hparams, **fit_hparams(model, bound.arguments)}
        run = FitRun(model, bound, record, state, hparams=hparams, logger=self.logger, say=self._say)
        self._running.add(id(model))
        try:
            return run.run(original)
        finally:
            self._running.discard(id(model))

    def _prepare(self, model, record: FitRecord) -> ModelState:
        """The model's state in the session: guarded on its first fit, remembered until close.

        The state lives on the model (`_STATE`) and the session holds the model
        weakly: a script that trains model after model (a sweep) frees each one
        it drops, with its logger and live diagnosis, which refer to it.
        """
        if self._models.get(id(model)) is model:
            return _seam.kept_on(model, _STATE)
        state = take_model(model, record, guard=self.guard, policy=self.policy, forward=self.forward,
                           quarantine_dir=self.quarantine_dir)
        _seam.keep_on(model, _STATE, state)
        self._models[id(model)] = model
        return state

    # -- progress lines -------------------------------------------------------------------
    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)


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
