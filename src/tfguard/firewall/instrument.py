"""The host side of the guarded step: one wrapper per model, policies, listeners.

`instrument(model)` attaches (once) an `Instrumentation` that replaces the
model's train step with the guarded one and wraps the train function Keras
builds. The wrapper keeps each batch in hand until its flags come back: a
bad one is quarantined, the policy is applied, and the signals the step
computed are handed to listeners (the logger, the live diagnosis). Signals
are computed once, in the graph, by a second trace of the step (the
recording step) that the wrapper calls only on the steps that record: every
step returns the optimizer's iterations after its update, so the host knows
the next step without reading a variable, and the other steps run a graph
with no signal op.

`guard(model)` is `instrument(model)` with a `GuardConfig`; the logger calls
`instrument(model).request(...)` for signals. With neither, the model is
untouched.

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> inst = instrument(model)
>>> inst.request(scalars_every=1)
>>> seen = []
>>> inst.add_listener(lambda step, signals: seen.append(step))
>>> _ = model.fit(np.ones((8, 4)), np.ones((8, 2)), batch_size=4, verbose=0)
>>> seen
[1, 2]
"""

from __future__ import annotations

import dataclasses
import warnings
import weakref
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf
from keras.src.trainers.data_adapters import data_adapter_utils

from tfguard.checks import hint_for
from tfguard.errors import GuardViolation
from tfguard.firewall import step as step_module
from tfguard.firewall import taps
from tfguard.firewall.config import GuardConfig, infer_contract

_INSTRUMENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

CHECKPOINT_ORDER = ("data", "forward", "loss", "gradients")
HINTS = {
    "forward": "lower the learning rate, clip the logits before softmax/exp, or use stable ops "
    "(tf.math.divide_no_nan, tf.nn.log_softmax, keras.ops.softmax)",
    "loss": "check the loss inputs: log(0) from probabilities of exactly 0 (use from_logits=True), "
    "or a learning rate that made the outputs overflow",
    "gradients": "lower the learning rate, or clip gradients (e.g. optimizer clipnorm=1.0)",
}


class GuardWarning(UserWarning):
    """A violation under policy `"warn"`."""


@dataclasses.dataclass
class GuardEvent:
    """One violation as the host saw it.

    Args:
        step: the optimizer's iterations when the batch was tried.
        checkpoint: data, forward, loss or gradients (the first that failed).
        where: the tensor, layer or variable.
        message: the full text.
        counts: the numbers behind it.
        action: `"raised"`, `"skipped"` or `"warned"`.
        quarantine: the folder of the saved batch, if saved.
        failed: every failed slot as `"checkpoint: where"`.
    """

    step: int
    checkpoint: str
    where: str
    message: str
    counts: dict
    action: str
    quarantine: str | None = None
    failed: list = dataclasses.field(default_factory=list)
    replay: object = None


class Instrumentation:
    """Everything tfguard attached to one model.

    Args:
        model: the Keras model.
    """

    def __init__(self, model: keras.Model):
        self.model = model
        self.guard: GuardConfig | None = None
        self.contract = None
        self.scalars_every = 0
        self.histograms_every = 0
        self.histogram_activations = True
        self.histogram_weights = False
        self.histogram_gradients = True
        self.weight_signals = False
        self.histogram_filter: Callable[[int], bool] | None = None
        self.tracing_recording = False  # set around each call: which trace the step builds
        self.plan: step_module.Plan | None = None
        self._plans: dict[bool, step_module.Plan] = {}
        self._host_step: int | None = None  # the optimizer's iterations before the next step
        self._pre_step: int | None = None  # ... before the step that just ran (recording steps)
        self.last_logs: dict | None = None
        self.last_applied = True
        self.listeners: list[Callable[[int, dict], None]] = []
        self.event_listeners: list[Callable[[GuardEvent], None]] = []
        self.events: list[GuardEvent] = []
        self.violations = 0
        self.skipped = 0
        self.epoch_violations = 0
        self.epoch_skipped = 0
        self.epoch_steps = 0
        self.consecutive_skips = 0
        self.quarantined = 0
        self._tapped: list = []
        self._attached = False
        self.in_graph_batch = False

    # -- configuration ---------------------------------------------------------
    def request(self, scalars_every: int | None = None, histograms_every: int | None = None,
                histogram_activations: bool | None = None, weights: bool | None = None,
                histogram_weights: bool | None = None, histogram_gradients: bool | None = None) -> None:
        """Asks the step to compute signals every N steps (0 = never); keeps the larger demand.

        Args:
            scalars_every: gradient norms, activation fractions, input
                statistics (and weight norms) every this many steps.
            histograms_every: gradient (and activation, weight) histograms.
            histogram_activations: include activation histograms.
            weights: include `weight_norm/<layer>` and `update_ratio/<layer>`.
            histogram_weights: include `hist/weights/<variable>`.
            histogram_gradients: include `hist/gradients/<variable>` (on by default).

        Example:

        >>> # instrument(model).request(scalars_every=10, histograms_every=100)
        """
        changed = False
        for name, value in (("weight_signals", weights), ("histogram_weights", histogram_weights),
                            ("histogram_gradients", histogram_gradients)):
            if value is not None and bool(value) != getattr(self, name):
                setattr(self, name, bool(value))
                changed = True
        if scalars_every is not None and scalars_every != self.scalars_every:
            self.scalars_every = _merge_every(self.scalars_every, scalars_every)
            changed = True
        if histograms_every is not None and histograms_every != self.histograms_every:
            self.histograms_every = _merge_every(self.histograms_every, histograms_every)
            changed = True
        if histogram_activations is not None:
            changed |= histogram_activations != self.histogram_activations
            self.histogram_activations = histogram_activations
        if changed:
            self._retrace()

    def set_guard(self, config: GuardConfig | None) -> None:
        """Turns the firewall on with `config`, or off with `None`."""
        self.guard = config
        self.contract = None
        self._retrace()

    def add_listener(self, fn: Callable[[int, dict], None]) -> None:
        """Calls `fn(step, signals)` after every step that computed signals."""
        if fn not in self.listeners:
            self.listeners.append(fn)

    def remove_listener(self, fn) -> None:
        if fn in self.listeners:
            self.listeners.remove(fn)

    def add_event_listener(self, fn: Callable[[GuardEvent], None]) -> None:
        """Calls `fn(event)` for every violation, before the policy acts."""
        if fn not in self.event_listeners:
            self.event_listeners.append(fn)

    def remove_event_listener(self, fn) -> None:
        if fn in self.event_listeners:
            self.event_listeners.remove(fn)

    # -- attaching ---------------------------------------------------------------
    def attach(self) -> None:
        """Installs the step and the train-function wrapper on the model (once)."""
        if self._attached:
            return
        model = self.model
        original_make = type(model).make_train_function
        original_reset = type(model).reset_metrics

        def make_train_function(force=False):
            self._prepare()
            original_make(model, force)
            function = model.train_function
            if function is not None and not getattr(function, "_tfguard", False):
                recording = None
                if self.wants_signals:
                    original_make(model, True)  # a second tf.function of the same step
                    recording = model.train_function
                model.train_function = self._wrap(function, recording)
            return model.train_function

        def reset_metrics():
            original_reset(model)
            self.epoch_violations = 0
            self.epoch_skipped = 0
            self.epoch_steps = 0
            self._host_step = None  # read again at the epoch's first step (a restore may move it)

        from tfguard.firewall.multiworker import enable_multi_worker

        enable_multi_worker(model)  # Keras 3.15 cannot fit under MWMS otherwise; else a no-op
        object.__setattr__(model, "train_step", step_module.make_step(model, self))
        object.__setattr__(model, "make_train_function", make_train_function)
        object.__setattr__(model, "reset_metrics", reset_metrics)
        self._attached = True
        self._retrace()

    def detach(self) -> None:
        """Restores the model's own train step and train function."""
        if not self._attached:
            return
        for name in ("train_step", "make_train_function", "reset_metrics"):
            if name in self.model.__dict__:
                object.__delattr__(self.model, name)
        taps.uninstall(self._tapped)
        self._tapped = []
        self._attached = False
        self.model.train_function = None

    @property
    def wants_signals(self) -> bool:
        """Whether any signal was requested (the recording step exists)."""
        return self.scalars_every > 0 or self.histograms_every > 0

    def _retrace(self) -> None:
        if self._attached:
            self.model.train_function = None
        self._plans = {}

    def _set_plan(self, plan: step_module.Plan) -> None:
        """Called by the step at trace time: the outputs of that trace."""
        self._plans[plan.recording] = plan
        self.plan = plan

    def _prepare(self) -> None:
        """Host-side set-up before a trace: the contract and the taps."""
        model = self.model
        if self.guard is not None and self.contract is None and self.guard.data is not None:
            self.contract = infer_contract(model) if self.guard.data == "infer" else self.guard.data
        want_taps = (self.guard is not None and self.guard.forward == "layers") or self.wants_signals
        if want_taps and not self._tapped:
            self._tapped = taps.tappable_layers(model)
            taps.install(self._tapped)

    # -- the host loop -------------------------------------------------------------
    def _wrap(self, keras_function, recording_function=None):
        """The train function Keras calls: picks the plain or the recording step, then checks.

        Args:
            keras_function: Keras's train function over the plain step.
            recording_function: the same over the recording step (`None`
                when no signal was requested).
        """
        model = self.model
        # One replica, one step per execution: the step hands the batch back with
        # its flags (a tensor handle, no copy), and Keras keeps pulling batches
        # in-graph. Otherwise (replicas, steps_per_execution > 1) the host pulls
        # each batch so a bad one is still in hand.
        self.in_graph_batch = (
            model.distribute_strategy.num_replicas_in_sync == 1
            and int(model.steps_per_execution) == 1
            and not getattr(model, "_tfguard_multi_worker", False)
        )

        def run_step(argument):
            record = recording_function is not None and self._records_next()
            self.tracing_recording = record
            try:
                logs = (recording_function if record else keras_function)(argument)
            finally:
                self.tracing_recording = False
            self.plan = self._plans.get(record, self.plan)
            return logs

        if self.in_graph_batch:

            def train_function(iterator):
                logs = run_step(iterator)
                batch = logs.get(step_module.OUTPUT_KEY, {}).pop("batch", {})
                data = (batch.get("x"), batch.get("y"), batch.get("sample_weight"))
                return self._after_step(data, logs)

            train_function._tfguard = True
            return train_function

        def train_function(iterator):
            outputs = None
            for _ in range(max(1, int(self.model.steps_per_execution))):
                try:
                    data = next(iterator)
                except (StopIteration, tf.errors.OutOfRangeError):
                    break
                outputs = self._after_step(data, run_step(iter([data])))
            if outputs is None:
                raise StopIteration
            return outputs

        train_function._tfguard = True
        return train_function

    def _records_next(self) -> bool:
        """Whether the next step records signals (by the host's count of the global step)."""
        if self._host_step is None:
            self._host_step = self._step()
        pre = self._pre_step = self._host_step
        if self.scalars_every > 0 and pre % self.scalars_every == 0:
            return True
        if self.histograms_every > 0 and pre % self.histograms_every == 0:
            return self.histogram_filter is None or bool(self.histogram_filter(pre + 1))
        return False

    def _after_step(self, data, logs: dict) -> dict:
        extra = logs.pop(step_module.OUTPUT_KEY, {})
        failures = np.asarray(extra["failures"]) if "failures" in extra else None
        if "iterations" in extra:  # the global step after the update, from the graph
            self._host_step = int(extra["iterations"])
        if failures is not None:
            if failures.any():
                step = self._host_step if self._host_step is not None else self._step()
                self._on_violation(data, extra, failures, step)
            else:
                self.consecutive_skips = 0
        if self.listeners and ("signals" in extra or "histograms" in extra):
            signals: dict = {}
            if "signals" in extra and float(extra["record_scalars"]) > 0:
                values = np.asarray(extra["signals"], np.float64)
                signals.update(zip(self.plan.signal_keys, values.tolist()))
            if "histograms" in extra and float(extra["record_histograms"]) > 0:
                stacked = np.asarray(extra["histograms"], np.float64)
                signals.update(zip(self.plan.hist_keys, stacked))
            moved = not self._step_stalled()
            signals = _meaningful(signals, moved)
            if signals:
                self.last_logs, self.last_applied = logs, moved
                for listener in list(self.listeners):
                    listener(self._host_step, signals)
                self.last_logs = None
        if self.guard is not None:
            self.epoch_steps += 1
            if self.epoch_skipped == self.epoch_steps:
                # No update applied this epoch: an empty mean is not a loss of 0.
                logs = {k: (float("nan") if not k.startswith("guard_") else v) for k, v in logs.items()}
            logs["guard_violations"] = float(self.epoch_violations)
            logs["guard_skipped"] = float(self.epoch_skipped)
        return logs

    def _step_stalled(self) -> bool:
        """Whether the step changed no weight: its iterations did not move (the guard
        skipped the update, or a LossScaleOptimizer dropped it on an overflow)."""
        return self._pre_step is not None and self._host_step == self._pre_step

    def _step(self) -> int:
        """The global step: the optimizer's iterations (read only when needed)."""
        return int(self.model.optimizer.iterations.numpy())

    def _on_violation(self, data, extra, failures, step) -> int:
        plan = self.plan
        config = self.guard
        failed = [i for i, f in enumerate(failures) if f > 0]
        order = {name: rank for rank, name in enumerate(CHECKPOINT_ORDER)}
        failed.sort(key=lambda i: (order[plan.slots[i].checkpoint], i))
        first = plan.slots[failed[0]]
        counts, detail = self._describe(failed[0], extra, data)
        applied = float(extra.get("applied", 0.0)) > 0
        action = {"raise": "raised", "skip": "skipped", "warn": "warned"}[config.policy]
        self.violations += 1
        self.epoch_violations += 1
        if not applied:
            self.skipped += 1
            self.epoch_skipped += 1
            self.consecutive_skips += 1
        else:
            self.consecutive_skips = 0
        update = "The update was applied." if applied else "The update was not applied."
        others = [f"{plan.slots[i].checkpoint}: {plan.slots[i].where}" for i in failed]
        message = (
            f"{first.where} at step {step} {detail} (checkpoint: {first.checkpoint}, "
            f"policy: {config.policy}). {update}"
        )
        if len(failed) > 1:
            message += f" Also failed: {', '.join(others[1:6])}{' ...' if len(others) > 6 else ''}."
        event = GuardEvent(step, first.checkpoint, first.where, message, counts, action, failed=others)
        if config.max_quarantined and self.quarantined < config.max_quarantined:
            from tfguard.forensics.quarantine import save_quarantine

            event.quarantine = save_quarantine(
                config.quarantine_dir, self.model, data, event, strategy=self.model.distribute_strategy
            )
            self.quarantined += 1
            message += f" The batch is saved in {event.quarantine}."
        hint = hint_for(first.check) if first.checkpoint == "data" else HINTS[first.checkpoint]
        if config.policy == "raise" and config.localize and event.quarantine:
            from tfguard.forensics.replay import replay

            try:
                report = replay(event.quarantine, model=self.model)
                event.replay = report
                message += "\n" + report.summary()
            except Exception as error:  # localization is best effort; the violation stands
                message += f"\nReplay could not localize: {type(error).__name__}: {error}"
        event.message = message
        self.events.append(event)
        for listener in list(self.event_listeners):
            listener(event)
        stopped = None
        if config.policy == "raise":
            stopped = message
        elif config.policy == "skip" and self.consecutive_skips > config.max_consecutive_skips:
            stopped = (
                f"Training stopped after {self.consecutive_skips} consecutive skipped steps "
                f"(max_consecutive_skips={config.max_consecutive_skips}); the weights are those "
                f"of step {step}, the last good update. Last violation: {message}"
            )
        if stopped is not None:
            raise GuardViolation(
                stopped,
                checkpoint=first.checkpoint,
                where=first.where,
                step=step,
                counts=counts,
                quarantine=event.quarantine,
                hint=hint,
            )
        if config.policy == "warn":
            warnings.warn(f"GuardViolation: {message}", GuardWarning, stacklevel=2)
        return step

    def _describe(self, index: int, extra, data) -> tuple[dict, str]:
        plan = self.plan
        slot = plan.slots[index]
        if index in plan.finite_slots:
            row = np.asarray(extra["finite_counts"])[plan.finite_slots.index(index)]
            nan, posinf, neginf, total = (int(v) for v in row)
            counts = {"nan": nan, "posinf": posinf, "neginf": neginf, "total": total}
            return counts, f"has {nan} NaN, {posinf} +Inf, {neginf} -Inf of {total} values"
        data_index = sum(1 for s in plan.slots[:index] if s.checkpoint == "data")
        if "data_values" in extra:  # several replicas: counted in the graph, all-reduced
            result = plan.describe[data_index]
            values = {k: np.asarray(v) for k, v in extra["data_values"][str(data_index)].items()}
        else:  # the batch is here: word the failure from it
            x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
            result = self.contract.evaluate(x, y, sample_weight)[data_index]
            values = {k: np.asarray(v) for k, v in result.tensors().items()}
        counts = {k: v.item() for k, v in values.items() if np.ndim(v) == 0 and k != "ok"}
        return counts, f"failed check '{slot.check}': {result.describe(values)}"


_UNMOVED = ("weight_norm/", "update_ratio/", "hist/weights/")  # what an unapplied update did not change


def _meaningful(signals: dict, moved: bool) -> dict:
    """Drops what a listener must not read as measured.

    An update that was not applied leaves the weights where they were: its
    weight norms, update ratios and weight histograms would repeat the
    previous step's at an unchanged global step. An update ratio of a layer
    whose weights were all zero is undefined (`step.NO_RATIO`).
    """
    return {
        tag: value
        for tag, value in signals.items()
        if (moved or not tag.startswith(_UNMOVED))
        and not (tag.startswith("update_ratio/") and value == step_module.NO_RATIO)
    }


def _merge_every(current: int, requested: int) -> int:
    if current <= 0:
        return max(0, int(requested))
    if requested <= 0:
        return current
    return int(np.gcd(current, int(requested)))


def instrument(model: keras.Model) -> Instrumentation:
    """Returns the model's `Instrumentation`, attaching it on first use.

    Example:

    >>> import keras
    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> instrument(m) is instrument(m)
    True
    """
    inst = _INSTRUMENTS.get(model)
    if inst is None:
        inst = Instrumentation(model)
        _INSTRUMENTS[model] = inst
    inst.attach()
    return inst


def instrumentation_of(model: keras.Model) -> Instrumentation | None:
    """The model's `Instrumentation` if tfguard attached one, else `None`."""
    return _INSTRUMENTS.get(model)


def release(model: keras.Model) -> None:
    """Detaches tfguard from the model entirely."""
    inst = _INSTRUMENTS.pop(model, None)
    if inst is not None:
        inst.detach()


__all__ = ["GuardEvent", "GuardWarning", "Instrumentation", "instrument", "instrumentation_of", "release"]
