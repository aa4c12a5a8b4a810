"""`instrument(model)`: what tfguard attaches to one model, and how it comes off again.

An `Instrumentation` wraps the model's own `train_step` (Keras's or the
model's override) in the guarded step (`tfguard._firewall.step`), wraps the
train function Keras builds in the host loop (`tfguard._firewall.host`), and
gives `fit` a small callback that tells it the epoch (`wrap_fit`,
`EpochTracker`). It holds the firewall's settings (`set_guard`), the
listeners' subscriptions (`bus`), the violations seen (`events`) and the
counters. With no guard and no subscription, the step is the model's own:
nothing is computed.

`guard(model)` is `instrument(model).set_guard(config)`; the logger and the
live diagnosis `subscribe` to step records.

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> inst = instrument(model)
>>> seen = []
>>> inst.subscribe(lambda record: seen.append((record.step, sorted(record.scalars)[0])), scalars_every=1)
>>> _ = model.fit(np.ones((8, 4)), np.ones((8, 2)), batch_size=4, verbose=0)
>>> seen
[(1, 'data/input_max'), (2, 'data/input_max')]
"""

from __future__ import annotations

import functools
import inspect
import warnings
import weakref
from collections.abc import Callable

import keras
import tensorflow as tf

from tfguard import _seam
from tfguard._distribute.keras_20585 import enable_multi_worker
from tfguard._distribute.lost_worker import COMPLETED_STEP
from tfguard._firewall.config import GuardConfig
from tfguard._firewall.host import HostLoop
from tfguard._firewall.outcome import StepOutcome
from tfguard._firewall.policy import Counters, GuardEvent, GuardWarning, PolicyEnforcer
from tfguard._firewall.spikes import SpikeWindow
from tfguard._firewall.step import make_step
from tfguard._hooks import context, taps
from tfguard._hooks.installed import set_installed
from tfguard._optimizer_state import optimizer_step
from tfguard._signals import probes
from tfguard._signals.record import Bus
from tfguard.checks._contract import infer_contract

_ATTRIBUTE = "_tfguard_instrumentation"
"""Where a model keeps its `Instrumentation` (`_seam.keep_on`: the two die together)."""
_INSTRUMENTED: weakref.WeakSet = weakref.WeakSet()
_PATCHED = ("train_step", "make_train_function", "reset_metrics", "fit", COMPLETED_STEP)  # seam.SITES


class Instrumentation(Counters):
    """Everything tfguard attached to one model.

    Args:
        model: the Keras model.
    """

    def __init__(self, model: keras.Model):
        super().__init__()
        self.model = model
        self.guard: GuardConfig | None = None
        self.spike_window: SpikeWindow | None = None  # the spike stage's statistics (`guard(spikes=...)`)
        self.contract = None
        self.bus = Bus()
        self.wanted = probes.SignalRequest()
        self.tracing_kinds: frozenset = frozenset()  # set around each call: what the trace records
        self.plans: dict = {}
        self.plan = None
        self.original_step = None
        self.step_optimizer = None
        self.host_step: int | None = None  # the global step before the next step (read again each epoch)
        self.last_outcome: StepOutcome | None = None  # the last step's, kept across epochs and fits
        self.event_listeners: list[Callable[[GuardEvent], None]] = []
        self.events: list[GuardEvent] = []
        self.coverage: list[str] = []
        self.enforcer = PolicyEnforcer(self)
        self.batches = 0  # batches this model trained on, across fits
        self.epoch: int | None = None
        self.epoch_batch: int | None = None
        self.in_graph_batch = False
        self.record_flag = None  # bool variables: whether this run of the recording trace computes
        self.histogram_flag = None  # its scalars, and its histograms (the host assigns them on change)
        self._due: tuple | None = None
        self._tapped: list = []
        self._host: HostLoop | None = None
        self._host_loop = None  # the host loop's train function, installed as the model's
        self._attached = False

    # -- configuration ---------------------------------------------------------
    def set_guard(self, config: GuardConfig | None) -> None:
        """Turns the firewall on with `config`, or off with `None` (a spike window starts over)."""
        self.guard = config
        self.spike_window = (SpikeWindow(config.spikes, self.model.distribute_strategy)
                             if config is not None and config.spikes is not None else None)
        self.contract = None
        self._retrace()

    def subscribe(self, listener, **request) -> None:
        """Calls `listener(record)` with a `StepRecord` on the steps its periods hit.

        Args:
            listener: a callable taking one `StepRecord`.
            **request: `scalars_every`, `histograms_every`, `histogram_kinds`,
                `weights`, `histogram_filter` (see `record.Subscription`).
        """
        self.bus.subscribe(listener, **request)
        self._update_wanted()

    def unsubscribe(self, listener) -> None:
        self.bus.unsubscribe(listener)
        self._update_wanted()

    def _update_wanted(self) -> None:
        """Retraces only when a subscriber asks for more than the traces compute.

        A listener that leaves (a logger at the end of `fit`) does not retrace:
        the next `fit` of the same model (a `fit` in a loop) reuses every trace.
        """
        wanted = probes.SignalRequest(weights=self.bus.weights or self.wanted.weights,
                                      histograms=self.bus.histogram_kinds | self.wanted.histograms)
        if wanted != self.wanted:
            self.wanted = wanted
            self._retrace()

    def add_event_listener(self, fn: Callable[[GuardEvent], None]) -> None:
        """Calls `fn(event)` for every violation, before the policy acts."""
        if fn not in self.event_listeners:
            self.event_listeners.append(fn)

    def remove_event_listener(self, fn) -> None:
        if fn in self.event_listeners:
            self.event_listeners.remove(fn)

    # -- attaching ---------------------------------------------------------------
    def attach(self) -> None:
        """Wraps the step, the train function, `reset_metrics` and `fit` of the model (once)."""
        if self._attached:
            return
        model = self.model
        self._retrace()
        fit = wrap_fit(model, self)
        original_make = type(model).make_train_function
        original_reset = type(model).reset_metrics
        self.original_step = model.train_step

        def make_once():  # Keras's train function, built without replacing the host loop
            return _seam.take_aside(model, "train_function", lambda: original_make(model, True))

        def make_train_function(force=False):
            if model.train_function is not None and not force:
                return model.train_function
            self.step_optimizer = None  # compiled again: the new trace names the optimizer that counts
            self.prepare()
            self._host = HostLoop(self, make_once)
            _seam.restore(model, "train_function", self._host_loop)  # an earlier compile's, if any
            self._host_loop = self._host.train_function()  # decides whether the step pulls its batch in the graph
            # the plain trace, made now: where the batch is pulled in the graph, `timed_train_function` (no
            # `Optional` handed back, whose `has_value`, `get_value` and structure cost Python per output on
            # every step); else Keras's own
            self._host.function(frozenset())
            _seam.replace(model, "train_function", self._host_loop)
            return model.train_function

        def reset_metrics():
            original_reset(model)
            self.reset_epoch_counts()
            self.host_step = None  # read again at the epoch's first step (a restore may move it)
            if self._host is not None:
                self._host.last_logs = None

        enable_multi_worker(model)  # Keras 3.15 cannot fit under MWMS otherwise; else a no-op
        _seam.replace(model, "train_step", make_step(model, self, self.original_step))
        _seam.replace(model, "make_train_function", make_train_function)
        _seam.replace(model, "reset_metrics", reset_metrics)
        _seam.replace(model, "fit", fit)
        _seam.replace(model, COMPLETED_STEP, lambda: self.host_step)
        self._attached = True
        model.train_function = None  # one Keras built for an earlier fit would run the unguarded step

    def detach(self) -> None:
        """Restores the model's own step, train function, `reset_metrics` and `fit`."""
        if not self._attached:
            return
        for name in _PATCHED:
            _seam.restore(self.model, name)
        taps.uninstall(self._tapped)
        context.unwatch_loss(self.model)
        self._tapped = []
        self._attached = False
        self._host = None
        _seam.restore(self.model, "train_function", self._host_loop)
        self._host_loop = None
        self.model.train_function = None  # Keras builds its own again

    def _retrace(self) -> None:
        """Drops every trace: each is traced again on its next use (the host loop stays installed)."""
        self.plans = {}
        if self._host is not None:
            self._host.forget()

    def set_plan(self, plan) -> None:
        """Called by the step at trace time: the outputs of that trace."""
        self.plans[plan.kinds] = plan
        self.plan = plan
        for note in plan.coverage:
            if note not in self.coverage:
                self.coverage.append(note)
                warnings.warn(f"tfguard: {note}.", GuardWarning, stacklevel=2)

    def set_due(self, scalars: bool, histograms: bool) -> None:
        """Tells the recording trace what this step computes: its scalars, its histograms (assigned on change)."""
        self._ensure_flags()
        if scalars != self._due[0]:
            self.record_flag.assign(scalars)
        if histograms != self._due[1]:
            self.histogram_flag.assign(histograms)
        self._due = (scalars, histograms)

    def _ensure_flags(self) -> None:
        if self.record_flag is None:
            with tf.init_scope():
                self.record_flag = tf.Variable(False, trainable=False, name="tfguard_scalars_due")
                self.histogram_flag = tf.Variable(False, trainable=False, name="tfguard_histograms_due")
            self._due = (False, False)

    def prepare(self) -> None:
        """HostLoop-side set-up before a trace: the contract, the taps, the optimizer's apply."""
        model = self.model
        context.install()
        self._ensure_flags()
        if self.guard is not None and self.contract is None and self.guard.data is not None:
            self.contract = infer_contract(model) if self.guard.data == "infer" else self.guard.data
        want_taps = self.guard is not None or self.bus.wants_signals
        if want_taps and not self._tapped:
            self._tapped = taps.tap(model)

    # -- counting ----------------------------------------------------------------
    def begin_fit(self) -> None:
        self.epoch = None

    def continue_from(self, epoch: int, steps_per_epoch: int | None) -> None:
        """A fit that starts at `epoch` > 0 continues the batch count of the run it resumes.

        After `keras.callbacks.BackupAndRestore` restores epoch 3 in a new
        process, the batches before it were seen by the killed process: the
        count goes on from the restored step (the optimizer's iterations) or
        from `epoch * steps_per_epoch` (which also counts the skipped
        batches), whichever is larger, as the guard's counters do, so the
        bad batch's folder is `batch-00000024`, not a second `batch-00000000`.
        """
        if epoch <= 0:
            return
        floor = self.global_step()
        if steps_per_epoch:
            floor = max(floor, int(epoch) * int(steps_per_epoch))
        self.batches = max(self.batches, floor)

    def begin_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.epoch_batch = None

    def end_fit(self) -> None:
        self.epoch = None
        self.epoch_batch = None

    def next_batch(self) -> tuple[int, int | None, int | None]:
        """Counts one more batch; returns `(batch, epoch, epoch_batch)`, 0-based."""
        batch = self.batches
        self.batches += 1
        if self.epoch is not None:
            self.epoch_batch = 0 if self.epoch_batch is None else self.epoch_batch + 1
        return batch, self.epoch, self.epoch_batch if self.epoch is not None else None

    def global_step(self) -> int:
        """The global step now: the iterations of the optimizer that counts the steps."""
        optimizer = self.step_optimizer or getattr(self.model, "optimizer", None)
        return self.batches if optimizer is None else optimizer_step(optimizer)

    def finish_step(self, outcome: StepOutcome) -> None:
        """Keeps the outcome of the step that just ran: its global step is where the next one starts."""
        self.last_outcome = outcome
        self.host_step = outcome.step_after

    @property
    def last_batch_size(self) -> int | None:
        """The leading dimension of the last step's batch, when known on the host (for a failure record)."""
        return self.last_outcome.batch_size if self.last_outcome is not None else None

    def global_step_hint(self) -> int:
        """The global step before the next step, kept on the host (read once per epoch)."""
        if self.host_step is None:
            self.host_step = self.global_step()
        return self.host_step


class EpochTracker(keras.callbacks.Callback):
    """Tells the instrumentation which epoch of `fit` runs (no batch hook: Keras keeps dispatching fast)."""

    def __init__(self, inst):
        super().__init__()
        self.inst = inst
        self._first_epoch = True

    def on_train_begin(self, logs=None):
        self._first_epoch = True

    def on_epoch_begin(self, epoch, logs=None):
        if self._first_epoch:  # a resumed fit (BackupAndRestore, initial_epoch) goes on counting
            self._first_epoch = False
            self.inst.continue_from(int(epoch), (self.params or {}).get("steps"))
        self.inst.begin_epoch(int(epoch))

    def on_train_end(self, logs=None):
        self.inst.end_fit()


def wrap_fit(model: keras.Model, inst):
    """A `fit` for this model that carries an `EpochTracker` (and calls the class's `fit`)."""
    signature = inspect.signature(type(model).fit)

    @functools.wraps(type(model).fit)
    def fit(*args, **kwargs):
        method = type(model).fit
        try:
            bound = signature.bind(model, *args, **kwargs)
        except TypeError:  # a wrong call: let Keras say what is wrong
            return method(model, *args, **kwargs)
        callbacks = bound.arguments.get("callbacks")
        if not isinstance(callbacks, keras.callbacks.CallbackList):
            listed = list(callbacks or [])
            if not any(isinstance(c, EpochTracker) for c in listed):
                bound.arguments["callbacks"] = [EpochTracker(inst), *listed]
        inst.begin_fit()
        return method(*bound.args, **bound.kwargs)

    return set_installed(fit)


def instrument(model: keras.Model) -> Instrumentation:
    """Returns the model's `Instrumentation`, attaching it on first use.

    Example:

    >>> import keras
    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> instrument(m) is instrument(m)
    True
    """
    inst = instrumentation_of(model)
    if inst is None:
        inst = Instrumentation(model)
        _seam.keep_on(model, _ATTRIBUTE, inst)
        _INSTRUMENTED.add(model)
    inst.attach()
    return inst


def instrumentation_of(model: keras.Model) -> Instrumentation | None:
    """The model's `Instrumentation` if tfguard attached one, else `None`."""
    return _seam.kept_on(model, _ATTRIBUTE)


def instrumented_models() -> list[keras.Model]:
    """The models tfguard is attached to now (guarded by `tfguard.guard`, a session, or a Logger)."""
    return list(_INSTRUMENTED)


def release(model: keras.Model) -> None:
    """Detaches tfguard from the model entirely."""
    inst = _seam.take_off(model, _ATTRIBUTE)
    if inst is not None:
        _INSTRUMENTED.discard(model)
        inst.detach()


__all__ = ["EpochTracker", "GuardEvent", "GuardWarning", "Instrumentation", "instrument", "instrumentation_of",
           "instrumented_models", "release", "wrap_fit"]
