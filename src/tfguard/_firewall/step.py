"""The guarded step: the model's own `train_step`, wrapped as a checked transaction.

Wrap, never replace: `make_step(model, inst, original)` returns a
`train_step(data)` that runs `original` (Keras's `train_step` or the
model's override: a GAN's, a VAE's) unchanged, inside:

1. the **data** stage, on the batch before the step sees it (class ids
   a `labels` check flags are clipped into range for the step, so a bad
   label cannot crash the loss kernel; such a step is never applied);
2. a **transaction** holding every variable the step may change (model
   variables with BatchNormalization statistics and seed generators, metric
   states, every optimizer the model holds, and whatever an update touches);
3. the step itself, with `FirewallContext` recording each optimizer update and
   each `compute_loss`, and taps recording layer outputs when asked;
4. the **forward**, **loss**, **gradients** and **update** stages on
   what the step recorded and on the state it left;
5. one decision, all-reduced over replicas, and the transaction rolled
   back under `tf.cond` when the step is rejected.

Everything is a tensor; nothing raises in the graph, so it holds under XLA.
The recording trace (`kinds` not empty) also computes the signals
(`tfguard._signals.probes`), each kind in a branch that runs only when the
host's flag for it is set (`Instrumentation.set_due`). The host
(`tfguard._firewall.host`) reads the flags and applies the policy.

Example (the model's own step is still there, under the guarded one):

>>> import keras, tfguard
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> own = model.train_step
>>> _ = tfguard.guard(model)
>>> getattr(model.train_step, ORIGINAL_STEP) == own
True
"""

from __future__ import annotations

import contextlib
import dataclasses

import keras
import tensorflow as tf

from tfguard._firewall import spikes, stages
from tfguard._firewall.apply_interception import FirewallContext
from tfguard._firewall.config import HOLD_BYTES
from tfguard._firewall.gate import Gate
from tfguard._firewall.stages import Flag, Slot
from tfguard._hooks import keras_compat, taps
from tfguard._hooks.context import ORIGINAL_STEP
from tfguard._optimizer_state import step_counter
from tfguard._signals import probes, stats
from tfguard.checks._labels import Labels

OUTPUT_KEY = "_tfguard"
LOGS_KEY = "_tfguard_logs"  # a step that returns something other than a dict
# Counts of a data check that add up across replicas (min/max and shapes stay local).
_SUMMED = ("bad", "total", "nan", "posinf", "neginf")


@dataclasses.dataclass
class Plan:
    """What one trace of the step computes, in output order (set at trace time).

    Args:
        slots: every flag's slot.
        finite_slots: indices of the slots whose NaN/Inf counts come back on failure.
        data_results: per data slot, its `CheckResult` when counted in the graph.
        scalar_keys: the tags of the stacked scalar signals.
        histogram_keys: the tags of the stacked histograms.
        kinds: what this trace records (`"scalars"`, `"histograms"`).
        coverage: what the guard could not see in this step, in words.
        counts_steps: whether the step reports the global step (an optimizer applied).
        loss_scaled: whether an update went through a `LossScaleOptimizer`, whose
            skipped steps (non-finite scaled gradients while it finds its scale)
            are normal and their gradient signals not measurements.
        host_histograms: `(tag, variable)` the host buckets after a histogram
            step (the weights after the update, outside the graph).
    """

    slots: list[Slot]
    finite_slots: list[int]
    data_results: list
    scalar_keys: list[str]
    histogram_keys: list[str]
    kinds: frozenset
    coverage: list[str]
    counts_steps: bool = True
    loss_scaled: bool = False
    host_histograms: tuple = ()


def _all_reduce_sum(value: tf.Tensor) -> tf.Tensor:
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def _sanitize(contract, data):
    """The batch with class ids clipped into range, when the contract checks labels.

    TensorFlow's sparse cross-entropy kernel fails the whole step on a label
    outside `[0, classes)` (on CPU) or returns NaN (on GPU); the data check
    has already flagged it, and such a step is never applied. A NaN or Inf
    float label becomes 0 first (clipping keeps a NaN).
    """
    if contract is None or not isinstance(data, tuple) or len(data) < 2:
        return data
    y = data[1]
    if not isinstance(y, tf.Tensor):
        return data
    for check in contract.checks["y"]:
        if isinstance(check, Labels):
            high = tf.cast(check.num_classes - 1, y.dtype)
            if y.dtype.is_floating:  # a NaN label clips to NaN, then casts to an index far out of range
                y = tf.where(tf.math.is_finite(y), y, tf.zeros_like(y))
            return (data[0], tf.clip_by_value(y, tf.zeros_like(high), high), *data[2:])
    return data


def decide(flags: list[Flag], policy: str, reducer: stats.Reducer | None = None) -> dict:
    """One decision from every flag, the same on every replica (the flags are all-reduced).

    Returns `failures` (per slot, how many replicas failed it), `applied`,
    `reject` (a bool tensor) and, when a finiteness check failed,
    `finite_counts` (NaN/+Inf/-Inf/size per finite slot, computed only then).
    """
    finite = [f for f in flags if f.tensor is not None]
    taken = [f for f in flags if f.taken]  # judged earlier in the step
    others = [f for f in flags if f.tensor is None and not f.taken]
    parts, rows = [], []
    if finite:
        # one cond: on a good step one sum per tensor; only a non-finite sum costs the exact
        # per-tensor flags and their NaN/Inf counts
        finite_flags, counts = stages.finite_ok([f.tensor for f in finite], counts=True, reducer=reducer)
        parts.append(finite_flags)
        rows.append(counts)
    if taken:
        parts.append(stages.stacked_flags(taken, "ok"))
        rows.append(stages.stacked_flags(taken, "counts"))
    if others:
        parts.append(stages.stacked_flags(others, "ok"))
    ok = tf.concat(parts, axis=0) if len(parts) > 1 else parts[0]
    position = {id(f): i for i, f in enumerate(finite + taken + others)}
    order = [position[id(f)] for f in flags]
    if order != list(range(len(flags))):
        ok = tf.gather(ok, order)
    failures = _all_reduce_sum(tf.cast(tf.logical_not(ok), tf.float32))
    failed = failures > 0
    must = [i for i, f in enumerate(flags) if f.slot.must_reject]
    must_reject = tf.reduce_any(tf.gather(failed, must)) if must else tf.constant(False)
    reject = must_reject if policy == "warn" else tf.reduce_any(failed)
    decision = {"failures": failures, "applied": tf.cast(tf.logical_not(reject), tf.float32),
                "reject": reject}
    if rows:
        counts = tf.concat(rows, axis=0) if len(rows) > 1 else rows[0]
        counted = {id(f): i for i, f in enumerate(finite + taken)}
        order = [counted[id(f)] for f in flags if f.finite]
        if order != list(range(len(order))):
            counts = tf.gather(counts, order)
        decision["finite_counts"] = _all_reduce_sum(counts)
    return decision


def step_after(outputs: dict, start: int) -> tuple[int, bool]:
    """The global step after a guarded step, and whether the step moved it, from the step's outputs.

    The one derivation for `fit`'s host and for `guard_step`: the step
    reports the iterations of the optimizer that counts the steps
    (`"iterations"`); a step that updated no optimizer counts the batches
    it applied (`"applied"`, 1 when it has no flag), so a rejected batch
    does not move the step, as an optimizer's iterations would not.

    Example:

    >>> step_after({"iterations": 8}, 7), step_after({"iterations": 7}, 7)
    ((8, True), (7, False))
    >>> step_after({"applied": 0.0}, 3), step_after({}, 3)
    ((3, False), (4, True))

    Args:
        outputs: the host's share of the step's outputs (numbers or arrays).
        start: the global step before the step.

    Returns:
        `(step, moved)`.
    """
    if "iterations" in outputs:
        step = int(outputs["iterations"])
        return step, step != start
    moved = float(outputs.get("applied", 1.0)) > 0
    return start + int(moved), moved


def _coverage(model, context: FirewallContext, config) -> list[str]:
    notes = []
    name = type(model).__name__
    if config.forward == "output" and not context.losses:
        notes.append(f"{name}'s train_step does not call compute_loss: the forward stage "
                     "watches the outputs of the model's direct sub-layers, and the loss "
                     "stage the float values the step returns")
    if not context.updates and not context.nested_updates:
        notes.append(f"{name}'s train_step applied no optimizer update that the guard could see: "
                     "only the state it holds is checked and rolled back")
    if context.nested_updates:
        notes.append(f"{context.nested_updates} optimizer update(s) inside the step's own control "
                     "flow (a cond or a loop) are checked only through the update stage")
    return notes


def make_step(model: keras.Model, inst, original) -> callable:
    """Builds the guarded/instrumented `train_step(data)` around `original`.

    Args:
        model: the Keras model.
        inst: its `Instrumentation` (settings; where the plans are kept).
        original: the model's own `train_step` (bound method).

    Returns:
        A function `data -> logs` for Keras's `make_train_function`; it
        traces the kinds of signals `inst.tracing_kinds` names.
    """

    def train_step(data):
        inst.prepare()  # host-side set-up, at trace time only
        kinds = frozenset(inst.tracing_kinds)
        config = inst.guard
        if config is None and not kinds:
            return _bare(model, inst, original, data)
        x, y, sample_weight = keras_compat.unpack(data)
        contract = inst.contract if config is not None else None
        flags: list[Flag] = []
        if contract is not None:
            flags += stages.data(contract, x, y, sample_weight, counted=not inst.in_graph_batch)
        context = FirewallContext(
            model, restores=config is not None,
            hold_bytes=config.hold_bytes if config is not None else HOLD_BYTES,
            record_flag=inst.record_flag if kinds else None, weights=bool(kinds) and inst.wanted.weights,
            histogram_flag=inst.histogram_flag if kinds and "gradients" in inst.wanted.histograms else None)
        reducer = stats.Reducer()
        layers_mode = config is not None and config.forward == "layers"
        want_taps = layers_mode or bool(kinds) or (config is not None and config.forward == "output")
        tape = taps.Tape() if want_taps else None
        data_flags = list(flags)
        spike_check = (spikes.SpikeCheck(inst.spike_window, spikes.batch_rows(x))
                       if config is not None and inst.spike_window else None)
        judged = {}  # layer outputs judged at a gated update's apply: (slot, tensor id) -> Flag (no annotation: AutoGraph cannot convert an annotated nonlocal)

        def collect(final: bool, logs=None, state: bool = True) -> list[Flag]:
            """The step's flags as of now: before a gated update (the gate), or at the end."""
            records = tape.records if tape is not None else []
            found = list(data_flags)
            forward = stages.forward(config.forward, context, records if layers_mode else _direct(model, records))
            if layers_mode and (judged or not (final or context.gate.commits)):  # a committing gate keeps them
                forward = [_judged_now(f, judged, reducer) for f in forward]
            found += forward
            found += stages.loss(context, logs if final else {})
            found += stages.gradients(context)
            if spike_check is not None:  # known before a gated update is written: the gate decides on it too
                found += spike_check.flags(context)
            if state:
                found += stages.update(context, context.gate, final)
            return found

        if config is not None:
            context.gate = Gate(config.policy, config.hold_bytes,
                                lambda state=True: collect(final=False, state=state), reducer,
                                context.weight_stats if context.weights else None, context.record_flag)
        with context.active(), (taps.recording(tape) if want_taps else contextlib.nullcontext()):
            logs = original(_sanitize(contract, data))
        records = tape.records if tape is not None else []
        if not isinstance(logs, dict):
            logs = {LOGS_KEY: logs}
        user_logs = {k: v for k, v in logs.items() if k != LOGS_KEY}

        outputs: dict = {}
        coverage: list[str] = []
        reject = tf.constant(False)
        if config is not None:
            flags = collect(final=True, logs=user_logs)
            coverage = _coverage(model, context, config)
            decision = decide(flags, config.policy, reducer)
            reject = decision.pop("reject")
            outputs.update(decision)
            if spike_check is not None and spike_check.table is not None:
                outputs[spikes.TABLE] = spike_check.table
                spike_check.record(reject)
            counted = [f.result for f in flags if f.result is not None]
            if counted:  # keyed by position: Keras wraps outputs in an Optional
                outputs["data_values"] = {
                    str(i): {k: _all_reduce_sum(tf.cast(v, tf.float32)) if k in _SUMMED
                             else tf.cast(v, tf.float32) for k, v in r.tensors().items()}
                    for i, r in enumerate(counted)}
            context.transaction.restore_if(reject, skip=context.gate.covers(flags))

        if inst.in_graph_batch and (config is not None or kinds):  # the batch, handed back (no copy)
            outputs["batch"] = {k: v for k, v in (("x", x), ("y", y), ("sample_weight", sample_weight))
                                if v is not None}
        step_optimizer = context.step_optimizer
        if step_optimizer is not None:
            inst.step_optimizer = step_optimizer
            # Read after the restore: a rejected step did not move it.
            outputs["iterations"] = tf.identity(tf.convert_to_tensor(step_counter(step_optimizer)))
        recording = probes.Recording()
        if kinds:
            recording = probes.record(model, context, records, x, y, inst.wanted, inst.record_flag,
                                      inst.histogram_flag)
            outputs.update(recording.outputs)
        finite_slots = [i for i, f in enumerate(flags) if f.finite]
        inst.set_plan(Plan(
            slots=[f.slot for f in flags], finite_slots=finite_slots,
            data_results=[f.result for f in flags if f.result is not None],
            scalar_keys=recording.scalar_keys, histogram_keys=recording.histogram_keys, kinds=kinds,
            coverage=coverage, counts_steps=step_optimizer is not None,
            loss_scaled=any(update.scale is not None for update in context.updates),
            host_histograms=recording.host_weights,
        ))
        logs = dict(logs)
        logs[OUTPUT_KEY] = outputs
        return logs

    setattr(train_step, ORIGINAL_STEP, original)
    return train_step


def _judged_now(flag: Flag, judged: dict, reducer: stats.Reducer) -> Flag:
    """A layer output's flag taken at a gated update's apply (`counted_flag`), once per tensor.

    At the step's end, a flag that still holds its tensor keeps it alive
    for its exact NaN/Inf count on failure: with every layer checked
    (`forward="layers"`), every layer's output lived through the backward
    pass and the dry run. A step that gates an update (a large model) judges
    them by their sums at its apply; a violation then names the layer, not
    how many of its values.
    """
    if flag.tensor is None:
        return flag
    key = (flag.slot, id(flag.tensor))
    if key not in judged:
        judged[key] = stages.counted_flag(flag.slot, flag.tensor, reducer)
    return judged[key]


def _bare(model: keras.Model, inst, original, data):
    """The plain trace of a model with listeners and no guard: the step, and where the global step is."""
    logs = original(data)
    if not isinstance(logs, dict):
        logs = {LOGS_KEY: logs}
    optimizer = inst.step_optimizer or getattr(model, "optimizer", None)
    outputs = {}
    if optimizer is not None:
        outputs["iterations"] = tf.identity(tf.convert_to_tensor(step_counter(optimizer)))
    inst.set_plan(Plan(slots=[], finite_slots=[], data_results=[], scalar_keys=[], histogram_keys=[],
                       kinds=frozenset(), coverage=[], counts_steps=optimizer is not None))
    return {**logs, OUTPUT_KEY: outputs}


def _direct(model: keras.Model, records: list) -> list:
    """The tape's records of the model's direct sub-layers (the output-mode fallback)."""
    direct = {id(layer) for layer in getattr(model, "layers", [])}
    return [(layer, out) for layer, out in records if id(layer) in direct]


__all__ = ["LOGS_KEY", "OUTPUT_KEY", "Plan", "decide", "make_step",
           "step_after"]
