"""The host loop: the train function Keras calls, around the traces of the guarded step.

For each step the host:

1. asks the bus what the step records (nothing, scalars, or scalars and
   histograms) from the global step it keeps, and calls the matching trace
   (`HostLoop.key`: a guarded model that is listened to has one trace, whose
   signals run when the host's flags say; otherwise a recording step runs
   the recording trace and every other step the plain one, which holds no
   signal op, once the idle steps have spent a trace's price on the
   recording trace: rent or buy);
2. counts the batch (batches seen, and epoch and batch in the epoch, from a
   small callback the guarded `fit` carries), so a bad batch is named by
   where it sat, not by the optimizer's iterations, which do not move on a
   rejected step;
3. reads what the step returned into one frozen `StepOutcome`
   (`tfguard._firewall.outcome`) and hands that same value on: to the
   policy (`PolicyEnforcer.handle`), to the listeners due (one
   `StepRecord`), and to the logs Keras gets back: on a rejected step, the
   last applied step's logs of this epoch (a rejected batch never enters
   what Keras shows).

One replica, one step per execution: the step hands the batch back with its
flags (a tensor handle, no copy), and Keras keeps pulling batches in-graph;
the train function (`tfguard._firewall.train_function.timed_train_function`)
also hands back when the step asked for its batch and when the batch was
there, so the host measures how long a recording step waited for it
(`perf/input_wait_fraction`):
input-bound training is seen on every run, without a profiler. Otherwise
(replicas, `steps_per_execution > 1`) the host pulls each batch so a bad one
is still in hand, and times the pull.

Example:

>>> import keras, numpy as np, tfguard
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> x = np.ones((8, 2), "float32"); x[5, 0] = np.nan
>>> model = tfguard.guard(model, policy="skip", localize=False, quarantine_dir=None)
>>> _ = model.fit(x, np.ones((8, 1)), batch_size=2, epochs=2, shuffle=False, verbose=0)
>>> [(e.batch, e.epoch, e.epoch_batch, e.step) for e in tfguard.guard_events(model)]
[(2, 0, 2, 2), (6, 1, 2, 5)]
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping

import numpy as np
import tensorflow as tf

from tfguard import _tags
from tfguard._distribute import keras_20585
from tfguard._firewall.config import HOLD_BYTES
from tfguard._firewall.outcome import StepOutcome, step_outcome
from tfguard._firewall.step import LOGS_KEY, OUTPUT_KEY
from tfguard._firewall.train_function import BATCH_TIMES, timed_train_function
from tfguard._hooks import dry_run, keras_compat
from tfguard._hooks.installed import set_installed
from tfguard._signals.contention import CpuWait
from tfguard._signals.histograms import HostHistograms
from tfguard._signals.probes import NO_RATIO
from tfguard._signals.record import HISTOGRAMS, RECORDING, StepRecord, freeze


class HostLoop:
    """The train function around the traces of one model's guarded step.

    Args:
        inst: the model's `Instrumentation`.
        make: `make(force=True)` builds Keras's train function over the
            current `train_step` (one call per trace kind).
    """

    measure_input_wait = True
    """Recording steps measure how long they waited for their batch (`benchmarks/input_wait.py` turns it off to price it)."""

    rent_before_buying = 1.0
    """How many times the recording trace's first call (its trace and compile) a listened-to model's idle steps
    spend on that trace before the plain trace is traced for them (`HostLoop.key`)."""

    def __init__(self, inst, make):
        self.inst = inst
        self.make = make
        self.functions: dict[frozenset, object] = {}
        self.first_calls: dict[frozenset, float] = {}  # seconds of each trace's first call (its compile) since it was made
        self.rent = 0.0  # seconds of idle steps run on the recording trace before the plain one is traced
        self.built = False
        self.last_logs: dict | None = None
        self.called = 0.0  # time.time() when the last step was called
        self.ended: float | None = None  # time.time() when the last step handed its logs back
        self.cpu_wait = CpuWait()  # the share of runnable time the threads waited for a CPU
        self.batch_listeners: list = []
        self.large: bool | None = None  # the model's state exceeds HOLD_BYTES (`key`)
        self.host_histograms = HostHistograms()  # weights bucketed after a histogram step

    def function(self, kinds: frozenset):
        """The train function of the trace for `kinds` (built on first use).

        Keras's own, or, for one replica and one step per call in a graph,
        `timed_train_function`: the same step, with the batch's arrival timed.
        """
        function = self.functions.get(kinds)
        if function is None:
            model = self.inst.model
            timed = self.inst.in_graph_batch and not model.run_eagerly
            function = self.functions[kinds] = timed_train_function(model, OUTPUT_KEY) if timed else self.make()
        return function

    def forget(self) -> None:
        """Drops every trace: each is traced again on its next use (and an idle step rents again)."""
        self.functions.clear()
        self.first_calls.clear()
        self.rent = 0.0

    def train_function(self):
        """The function to install as `model.train_function`."""
        inst = self.inst
        model = inst.model
        inst.in_graph_batch = (
            model.distribute_strategy.num_replicas_in_sync == 1
            and int(model.steps_per_execution) == 1
            and not keras_20585.enabled(model)
        )
        if inst.in_graph_batch:

            def train_function(iterator):
                start = inst.global_step_hint()
                kinds = inst.bus.due(start) if inst.bus.wants_signals else frozenset()
                if kinds and self.measure_input_wait and model.run_eagerly:  # nothing to trace: pull and time
                    return self._timed_step(iterator, kinds, start)
                if not self.built:
                    self._build_once(getattr(iterator, "element_spec", None))
                key = self.key(kinds)
                warm = key in self.first_calls
                logs = self._call(key, kinds, iterator)
                extra = logs.get(OUTPUT_KEY, {})
                batch = extra.pop("batch", {})
                times = extra.pop(BATCH_TIMES, None)
                wait = None
                if kinds and warm and times is not None and self.measure_input_wait:
                    asked, ready = np.asarray(times).tolist()  # the pull's time, in the graph
                    wait = _wait_share(ready - asked, self._cycle_start(self.called), extra, time.time)
                data = (batch.get("x"), batch.get("y"), batch.get("sample_weight"))
                return self.after_step(data, logs, kinds, start, input_wait=wait)

        else:

            def train_function(iterator):
                outputs = None
                for _ in range(max(1, int(model.steps_per_execution))):
                    start = inst.global_step_hint()
                    kinds = inst.bus.due(start) if inst.bus.wants_signals else frozenset()
                    try:
                        outputs = self._timed_step(iterator, kinds, start)
                    except StopIteration:
                        break
                if outputs is None:
                    raise StopIteration
                return outputs

        set_installed(train_function)
        train_function.peek_batch = self.peek_batch
        return train_function

    def peek_batch(self, listener) -> None:
        """Calls `listener(batch)` once, with the next batch a step hands back (`(x, y, sample_weight)`).

        The batch stays where the step left it: nothing is pulled on the host
        for it, so no trace runs only to show it (a logger's first-batch
        images). A step that hands no batch back (the plain trace of a model
        that is not guarded) leaves the listener for the next one.
        """
        self.batch_listeners.append(listener)

    def _hand_batch(self, data) -> None:
        if not self.batch_listeners or all(part is None for part in tf.nest.flatten(data)):
            return
        listeners, self.batch_listeners = self.batch_listeners, []
        for listener in listeners:
            with contextlib.suppress(Exception):  # a look at the data is never worth a training step
                listener(data)

    def _timed_step(self, iterator, kinds: frozenset, start: int) -> dict:
        """Pulls the batch on the host, runs the step, and measures the share spent waiting for data.

        The wait is the time `next(iterator)` blocked; the step, the time
        until its outputs are on the host. Their ratio is
        `perf/input_wait_fraction` of a recording step (the first call of a
        trace, which compiles it, is not measured).
        """
        begin = time.time()
        since = self._cycle_start(begin)
        try:
            data = next(iterator)
        except (StopIteration, tf.errors.OutOfRangeError):
            raise StopIteration from None
        pulled = time.time()
        self._build_once(data)
        key = self.key(kinds)
        warm = key in self.first_calls
        logs = self._call(key, kinds, iter([data]))
        extra = logs.get(OUTPUT_KEY, {})
        extra.pop("batch", None)
        wait = _wait_share(pulled - begin, since, extra, time.time) if warm else None
        return self.after_step(data, logs, kinds, start, input_wait=wait)

    def _build_once(self, batch) -> None:
        """Builds the optimizer's slots and the metrics outside the trace, from a batch or its spec.

        Keras would build them inside its first trace and then trace the step
        a second time; built here, the first trace is the only one.
        """
        if not self.built and batch is not None:
            self.built = True
            keras_compat.build_before_trace(self.inst.model, batch)

    def key(self, kinds: frozenset) -> frozenset:
        """The trace a step that records `kinds` runs: the plain one, or the recording one.

        A guarded model's step holds every variable's value anyway, so a
        model that is guarded and listened to has one trace, the recording
        one, for every step: its signals are computed only when the host's
        flags say so. So does a large model listened to without a guard
        (weights and optimizer state above `HOLD_BYTES`): its step dwarfs
        the idle branches of the recording trace, and a second trace would
        cost its own compile memory and time (ResNet50: ~0.3 GB, the first
        `fit`'s longest part). Otherwise a step that records nothing runs
        the plain trace, which holds no signal op, once it is worth tracing
        (`_idle_on_recording_trace`).
        """
        inst = self.inst
        if kinds or (inst.bus.wants_signals and (inst.guard is not None or self._large() or self._idle_on_recording_trace())):
            return RECORDING
        return frozenset()

    def _idle_on_recording_trace(self) -> bool:
        """Whether an idle step of a listened-to model runs the recording trace rather than trace the plain one.

        Rent or buy. The plain trace costs a trace and compile once (the
        200-layer MLP: as long as ~1,000 of its steps); the recording trace,
        run with its flags off, costs a little on each idle step (figures
        in docs/benchmarks.md, "Depth"). So idle steps run the recording
        trace (traced first if none is) until they have spent
        `rent_before_buying` times its first call, then the plain trace is
        traced once and runs every idle step:
        a short `fit` pays one trace, a long one at most its price again in
        rent. Counting the idle steps' whole time as rent buys early. One
        replica only: under a strategy every worker must pick the same trace.
        """
        if not self.inst.in_graph_batch or frozenset() in self.first_calls:
            return False
        price = self.first_calls.get(RECORDING)
        return price is None or self.rent < self.rent_before_buying * price

    def _large(self) -> bool:
        """Whether the model's weights and (built) optimizer state exceed `HOLD_BYTES` (kept once the optimizers are built)."""
        if self.large is not None:
            return self.large
        model = self.inst.model
        large = dry_run.model_state_bytes(model) > HOLD_BYTES
        if large or all(o.built for o in keras_compat.optimizers_of(model)):
            self.large = large
        return large

    def _call(self, key: frozenset, kinds: frozenset, argument):
        """Runs the trace `key` (`self.key(kinds)`): the plain one, or the recording one, told what is due."""
        inst = self.inst
        if key:
            inst.set_due(bool(kinds), HISTOGRAMS in kinds)
        function = self.function(key)
        inst.tracing_kinds = key
        began = time.perf_counter()
        try:
            self.called = time.time()
            logs = function(argument)
        finally:
            inst.tracing_kinds = frozenset()
        spent = time.perf_counter() - began
        if key not in self.first_calls:
            self.first_calls[key] = spent
        elif key and not kinds:
            self.rent += spent
        inst.plan = inst.plans.get(key, inst.plan)
        return logs

    def after_step(self, data, logs: dict, kinds: frozenset, start: int,
                   input_wait: float | None = None) -> dict:
        """Counts the batch, makes the step's `StepOutcome` and hands it to each consumer; returns Keras's logs.

        The same outcome goes to the instrumentation (the global step, the
        last batch's size), the policy (on a checked step), the listeners
        due (as a `StepRecord`), and the logs Keras shows.
        """
        inst = self.inst
        extra = logs.pop(OUTPUT_KEY, {})
        user_logs = logs.pop(LOGS_KEY) if LOGS_KEY in logs else logs
        plan = inst.plan
        outcome = step_outcome(extra, user_logs, plan, step_before=start, position=inst.next_batch(),
                               batch_size=_batch_size(data), recorded=kinds, input_wait_fraction=input_wait)
        inst.finish_step(outcome)
        self._hand_batch(data)
        if outcome.checked:
            inst.enforcer.handle(outcome, plan, data)
        if outcome.recorded and inst.bus.subscriptions:
            self._deliver(outcome, plan)
        self.ended = time.time()
        return self._keras_logs(outcome)

    def _cycle_start(self, called: float) -> float:
        """When the step called at `called` began, for its share of wall time: the previous step's
        end (Keras's callbacks and Python between two steps are part of its wall time), or
        `called` for the first step."""
        return self.ended if self.ended is not None and self.ended <= called else called

    def _deliver(self, outcome: StepOutcome, plan) -> None:
        """Hands the listeners due one `StepRecord` of `outcome`, with what the host measures besides."""
        scalars = dict(outcome.signals)
        histograms = dict(outcome.histograms)
        if outcome.input_wait_fraction is not None:
            scalars[_tags.INPUT_WAIT_FRACTION] = outcome.input_wait_fraction
            cpu_wait = self.cpu_wait.sample()
            if cpu_wait is not None:
                scalars[_tags.CPU_WAIT_FRACTION] = cpu_wait
        if HISTOGRAMS in outcome.recorded and plan.host_histograms:
            histograms.update(self.host_histograms(plan.host_histograms))
        scalars, histograms = _meaningful(scalars, histograms, outcome.moved, plan.loss_scaled)
        logs = outcome.logs if outcome.applied else {}
        record = StepRecord(
            step=outcome.step_after, batch=outcome.batch, epoch=outcome.epoch, moved=outcome.moved,
            scalars=freeze(scalars), histograms=freeze(histograms), logs=freeze(_numbers(logs)),
        )
        self.inst.bus.deliver(record)

    def _keras_logs(self, outcome: StepOutcome):
        """The logs Keras shows for the step: a rejected step's are the last applied step's of this epoch."""
        inst = self.inst
        if not isinstance(outcome.logs, Mapping):
            return outcome.logs
        logs = dict(outcome.logs)
        if outcome.applied:
            self.last_logs = logs
        elif self.last_logs is not None:  # the metrics as the last applied step left them
            logs = self.last_logs
        else:  # no update applied this epoch yet: an empty mean is not a loss of 0
            logs = {k: float("nan") for k in logs}
        if inst.guard is not None:
            logs = dict(logs)
            logs[_tags.KERAS_GUARD_VIOLATIONS] = float(inst.epoch_violations)
            logs[_tags.KERAS_GUARD_SKIPPED] = float(inst.epoch_skipped)
        return logs


_UNMOVED = (_tags.WEIGHT_NORM, _tags.UPDATE_RATIO)  # what an update that was not applied did not change
_GRADIENT_SIGNALS = (_tags.GLOBAL_GRAD_NORM, _tags.grad_norm(""), _tags.zero_grad_fraction(""))


def _wait_share(waited: float, began: float, extra: dict, clock) -> float | None:
    """The share of a step's wall time spent waiting for its batch: `waited` seconds over the step.

    The step runs from `began` (read on `clock`: the previous step's end, so
    that Python and Keras's callbacks between two steps count as the wall
    time they are) until its outputs are on the host; `None` when `clock`
    did not move forward.
    """
    if "iterations" in extra:
        np.asarray(extra["iterations"])  # the step's outputs are here: it has run
    done = clock()
    if done <= began:
        return None
    return min(1.0, max(0.0, waited / (done - began)))


def _meaningful(scalars: dict, histograms: dict, moved: bool, loss_scaled: bool = False) -> tuple[dict, dict]:
    """Drops what a listener must not read as measured.

    An update that was not applied leaves the weights where they were: its
    weight norms, update ratios and weight histograms would repeat the
    previous step's at an unchanged global step. An update ratio of a layer
    whose weights were all zero is undefined (`probes.NO_RATIO`). A step a
    `LossScaleOptimizer` skipped (its scaled gradients overflowed while it
    looks for its scale: normal under mixed precision) measured no gradient:
    its gradient norms and histograms are dropped, never diagnosed.
    """
    if moved and NO_RATIO not in scalars.values():  # an applied update with every ratio defined: all of it
        return scalars, histograms
    scalars = {t: v for t, v in scalars.items()
               if (moved or not t.startswith(_UNMOVED))
               and not (t.startswith(_tags.UPDATE_RATIO) and v == NO_RATIO)
               and (moved or not loss_scaled or not t.startswith(_GRADIENT_SIGNALS))}
    if not moved:
        unmoved = (_tags.hist_weights(""), _tags.hist_gradients("")) if loss_scaled else (_tags.hist_weights(""),)
        histograms = {t: v for t, v in histograms.items() if not t.startswith(unmoved)}
    return scalars, histograms


def _batch_size(data) -> int | None:
    """The leading dimension of the batch's first input, when it is known on the host."""
    try:
        leaves = [t for t in tf.nest.flatten(data) if t is not None]
        shape = getattr(leaves[0], "shape", None) if leaves else None
        return int(shape[0]) if shape is not None and len(shape) and shape[0] is not None else None
    except (TypeError, ValueError, AttributeError, IndexError):  # per-replica values: unknown here
        return None


def _numbers(logs) -> dict:
    out = {}
    for key, value in (logs or {}).items():
        try:
            out[str(key)] = float(np.asarray(value))
        except (TypeError, ValueError):
            continue
    return out


__all__ = ["HostLoop"]
