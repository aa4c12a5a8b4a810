"""`InvariantWatch`: runs the invariant checks of one model, once each, and hands out the records.

The checks cost nothing per step. The watch works at three moments:

1. the start of the model's first fit: fingerprints of the trainable
   variables (`variables.Fingerprints`; for a model Keras builds only in its
   first step, after that step, and `trained_unused` then waits for the
   first epoch end);
2. after the first step, with the batch that step trained on (handed over
   by tfguard's host loop, `peek_batch`: nothing is pulled or retraced for
   it): `training_mode_leak`, `batch_dependence`, `labels_ignored` and
   `trained_unused`, from a few eager passes of the model's own functions
   on at most `BATCH_ROWS` examples;
3. each epoch end: `untrained_variable` (once, at the first epoch end),
   `collapsed_output` (one inference pass on the kept rows, until it fails)
   and `loss_domain` (the loss at the model's predictions against its best
   inside the labels' range, `loss_domain.domain_read`, until it fails).

Every check yields one record, `{"check", "ok", "where", "evidence", "step",
"epoch"}`, handed to each listener (the Logger writes it as
`tags.INVARIANT_RECORDS`, `LiveDiagnosis` keeps it) exactly once, whichever
callback asked first. A check that cannot run on a program (a GAN without
`call`) is skipped silently; a failing check never stops training.

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="d")])
>>> model.compile("sgd", "mse")
>>> records = []
>>> w = watch(model)
>>> w.add_listener(records.append)
>>> w.begin_fit()
>>> rng = np.random.default_rng(0)
>>> w.on_batch((rng.normal(size=(8, 3)), rng.normal(size=(8, 2)), None))
>>> sorted((r["check"], r["ok"]) for r in records)[:2]
[('batch_dependence', True), ('labels_ignored', True)]
"""

from __future__ import annotations

import contextlib
import functools
import time
import weakref
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from tfguard import _seam
from tfguard._hooks.keras_compat import unpack
from tfguard._hooks.untouched import untouched
from tfguard._optimizer_state import model_step
from tfguard.invariants import _batches, _evidence, _inference, _labels, _loss_domain, _variables
from tfguard.invariants._probe import forward

BATCH_ROWS = 32
"""Examples of the first batch kept for the checks (the cost of each pass)."""

SCAN_ROWS = 4 * BATCH_ROWS
"""Rows of the first batch looked at for `BATCH_ROWS` a check can read (finite, with weight)."""

READ_ROWS = 2
"""Examples of the pass that finds which variables inference reads (through a gradient tape, which
holds what a backward pass would need)."""

_ATTRIBUTE = "_tfguard_invariant_watch"
"""Where a model keeps its `InvariantWatch` (`_seam.keep_on`: the two die together; its listeners, a
Logger's methods, refer to the model)."""


def _timed(method):
    """Adds the host time a moment of the watch takes to `watch.seconds`."""
    @functools.wraps(method)
    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
    return timed


class InvariantWatch:
    """The invariant checks of one model across its fits.

    Args:
        model: the Keras model.
        step: `() -> int`, the global step now. Defaults to `None` (the
            optimizer's iterations).
    """

    def __init__(self, model: keras.Model, step: Callable[[], int] | None = None):
        self._model = weakref.ref(model)
        self._step = step
        self.listeners: list[Callable[[dict], None]] = []
        self.records: list[dict] = []
        self.fingerprints: _variables.Fingerprints | None = None
        self.batch = None  # (x, y, sample_weight) of the first batch, at most BATCH_ROWS rows
        self.read: set[str] | None = None
        self.seconds = 0.0  # host time spent in the checks (begin_fit, on_batch, end_epoch)
        self.errors: list[str] = []  # checks that could not run on this program, and why
        self._epochs_done: set[int] = set()
        self._untrained_done = False
        self._unused_pending = False  # trained_unused waits for the first epoch end
        self._collapse_done = False
        self._domain_done = False
        self._epoch = 0

    @property
    def model(self) -> keras.Model | None:
        return self._model()

    # -- listeners ---------------------------------------------------------------
    def add_listener(self, fn: Callable[[dict], None]) -> None:
        """Calls `fn(record)` for each record from now on (once per listener)."""
        if fn not in self.listeners:  # equality: a bound method is a new object at each access
            self.listeners.append(fn)

    def remove_listener(self, fn) -> None:
        self.listeners = [f for f in self.listeners if f != fn]

    def _emit(self, record: dict | None, epoch: int | None = None) -> None:
        if record is None:
            return
        record = {**record, "step": self.step(), "epoch": self._epoch if epoch is None else epoch}
        self.records.append(record)
        for fn in list(self.listeners):
            with contextlib.suppress(Exception):
                fn(record)

    def step(self) -> int:
        """The global step now."""
        if self._step is not None:
            return int(self._step())
        return model_step(self.model)

    # -- the moments ---------------------------------------------------------------
    @_timed
    def begin_fit(self, epoch: int = 0) -> None:
        """At a fit's start: fingerprints (first fit only) and a request for the first batch."""
        model = self.model
        self._epoch = int(epoch)
        if model is None:
            return
        if self.fingerprints is None:
            with contextlib.suppress(Exception):
                taken = _variables.Fingerprints.take(model)
                self.fingerprints = taken if taken.paths else None  # not built yet: after step 1
        if self.batch is None:
            peek = getattr(getattr(model, "train_function", None), "peek_batch", None)
            if peek is not None:
                peek(self.on_batch)

    @_timed
    def on_batch(self, data) -> None:
        """After the first step, with its batch: the structural checks."""
        model = self.model
        if model is None or self.batch is not None:
            return
        x, y, sample_weight = unpack(data) if not (isinstance(data, tuple) and len(data) == 3) else data
        cut = _usable(x, y, sample_weight)
        if cut is None:  # no two rows a check can read (a NaN batch the firewall skipped, no weight)
            self._peek_again(model)
            return
        self.batch = cut
        x, y, sample_weight = self.batch
        if self.fingerprints is None:  # a model built in its first step: moves count from here
            self.fingerprints = self._guarded(_variables.Fingerprints.take, model)
            self._unused_pending = True
        has_call = True
        for check in (self._leak_and_mixing, self._trained_unused):
            if has_call:
                has_call = self._run(check, model, x)
        if has_call:
            self._emit(self._guarded(_labels.labels_read, model, x, y, sample_weight))
            record = self._guarded(_labels.metrics_read, model, x, y, sample_weight)
            if record is not None and record["ok"] is False:  # the loss's record says the check ran
                self._emit(record)

    def _peek_again(self, model) -> None:
        """Asks for the next batch a step hands back (this one had no rows a check can read)."""
        peek = getattr(getattr(model, "train_function", None), "peek_batch", None)
        if peek is not None:
            peek(self.on_batch)

    @_timed
    def end_epoch(self, epoch: int) -> None:
        """At an epoch end (once per epoch, whichever callback asks first)."""
        model = self.model
        epoch = int(epoch)
        if model is None or epoch in self._epochs_done:
            return
        self._epochs_done.add(epoch)
        self._epoch = epoch
        if not self._untrained_done and self.fingerprints is not None:
            self._untrained_done = True
            moved = self._guarded(self.fingerprints.moved, model)
            if isinstance(moved, list):
                self._emit(self._untrained(model, moved))
                if self._unused_pending and self.read is not None and moved:
                    self._emit(self._unused(model, moved))
        if not self._collapse_done and self.batch is not None and self.read is not None:
            record = self._guarded(_inference.collapse, model, self.batch[0], None, self.batch[1])
            if record is not None and record["ok"] is False:
                self._collapse_done = True
                self._emit(record)
            elif record is not None and epoch == min(self._epochs_done):
                self._emit(record)  # the first clean check says the check ran
        if not self._domain_done and self.batch is not None and self.read is not None:
            record = self._guarded(_loss_domain.domain_read, model, *self.batch)
            if record is not None and record["ok"] is False:
                self._domain_done = True
                self._emit(record)
            elif record is not None and epoch == min(self._epochs_done):
                self._emit(record)

    # -- the checks -----------------------------------------------------------------
    def _run(self, check, model, x) -> bool:
        """Runs one check; `False` when the model has no `call` to check."""
        try:
            check(model, x)
        except NotImplementedError:
            return False
        except Exception as error:  # noqa: BLE001 - a check that cannot run on a program says nothing
            self.errors.append(f"{check.__name__}: {type(error).__name__}: {error}")
        return True

    def _leak_and_mixing(self, model, x) -> None:
        leak = _inference.determinism(model, x)
        self._emit(leak)
        if leak["ok"] is not False:  # outputs that are random at inference compare nothing
            self._emit(_inference.batch_independence(model, x))

    def _guarded(self, fn, *args):
        """`fn(*args)`, or `None` (the reason kept in `errors`) when it cannot run on this program."""
        try:
            return fn(*args)
        except Exception as error:  # noqa: BLE001 - a check that cannot run on a program says nothing
            self.errors.append(f"{fn.__name__}: {type(error).__name__}: {error}")
            return None

    def _untrained(self, model, moved: list[str]) -> dict | None:
        """The `untrained_variable` record, or `None` for a model with several optimizers.

        A GAN's losses are differences of one network's outputs: some of its
        variables get no gradient by design (a WGAN critic's output bias
        cancels in `mean(fake) - mean(real)`).
        """
        if _variables.optimizer_count(model) > 1:
            return None
        still = [p for p in self.fingerprints.paths if p not in set(moved)]
        need = None
        if still and moved and self.batch is not None and self.read is not None:
            need = self._guarded(_variables.needed, model, self.batch[0], still)
        return _variables.untrained(model, moved, self.fingerprints.paths, self.read, need)

    def _trained_unused(self, model, x) -> None:
        with untouched(model):
            self.read = _reads(model, x)
        if self.fingerprints is None or self._unused_pending:
            return
        moved = self.fingerprints.moved(model)
        if moved:
            self._emit(self._unused(model, moved))

    def _unused(self, model, moved: list[str]) -> dict | None:
        """The `trained_unused` record, or `None` for a model with several optimizers (a GAN)."""
        self._unused_pending = False
        if _variables.optimizer_count(model) > 1:
            return None
        return _variables.trained_unused(model, moved, self.read)




def _usable(x, y, sample_weight) -> tuple | None:
    """At most `BATCH_ROWS` rows of the batch a check can read, as numpy; `None` below two.

    Rows with a non-finite input or label, or a zero sample weight, are left
    out (`evidence.usable_rows`): a loss is 0 for any labels on a row without
    weight, and NaN compares as nothing.
    """
    count = min(_batches.rows(x) or 0, SCAN_ROWS)
    if count < 2:
        return None
    parts = [None if part is None else _batches.to_numpy(_batches.take(part, count))
             for part in (x, y, sample_weight)]
    keep = _evidence.usable_rows(*parts)
    if keep is None or len(keep) == count:
        keep = np.arange(count)
    keep = keep[:BATCH_ROWS]
    if len(keep) < 2:
        return None
    return tuple(None if part is None else tf.nest.map_structure(
        lambda a: a if a is None or np.ndim(a) == 0 or len(a) != count else a[keep], part)
        for part in parts)


def _reads(model: keras.Model, x) -> set[str]:
    """The trainable variables an inference pass reads, found on `READ_ROWS` examples of `x`.

    Which variables a pass reads does not depend on the batch's size; a
    model that takes one batch size only (a stateful RNN) is asked again
    with the whole of `x`.
    """
    try:
        return forward(model, _batches.take(x, READ_ROWS), layers=False).read
    except Exception:  # noqa: BLE001 - the pass on the whole batch says what is wrong, if anything
        return forward(model, x, layers=False).read


def watch(model: keras.Model, step: Callable[[], int] | None = None) -> InvariantWatch:
    """The model's `InvariantWatch`, created on first use (one per model).

    Args:
        model: the Keras model.
        step: `() -> int`, the global step. Defaults to `None` (the optimizer's iterations).
    """
    found = watch_of(model)
    if found is None:
        found = InvariantWatch(model, step)
        _seam.keep_on(model, _ATTRIBUTE, found)
    elif step is not None and found._step is None:
        found._step = step
    return found


def forget(model: keras.Model) -> None:
    """Drops the model's watch: its next fit checks everything again (a benchmark of the one-time cost)."""
    _seam.take_off(model, _ATTRIBUTE)


def watch_of(model: keras.Model) -> InvariantWatch | None:
    """The model's `InvariantWatch` if one was made, else `None`."""
    return _seam.kept_on(model, _ATTRIBUTE)


__all__ = ["BATCH_ROWS", "READ_ROWS", "SCAN_ROWS", "InvariantWatch", "forget", "watch", "watch_of"]
