"""The guarded train step: checks at four checkpoints, a gated update, signals.

The step mirrors Keras 3's `TensorFlowTrainer.train_step` and adds:

* data checks on `(x, y, sample_weight)` (a `Contract`, full counts: cheap);
* forward checks: the model's outputs, or every tapped layer's output;
* the loss, and every non-None gradient, finite (a fast flag per tensor;
  NaN/+Inf/-Inf counts are computed only on a failing step, under `tf.cond`);
* the update applied under `tf.cond` only when healthy, in a way that works
  in a replica context (the flags are all-reduced, so every replica decides
  the same; merge-call strategies get the cond in cross-replica context, as
  Keras's `LossScaleOptimizer` does);
* metrics updated only for applied steps, so a NaN never enters the epoch mean;
* signals (gradient norms, weight norms and update ratios, dead/saturated
  fractions, input statistics, histograms) in a second trace of the same
  step, the *recording* step, which the host calls only on the steps that
  record (`Instrumentation`): every other step runs a graph without a
  single signal op, so signals cost nothing between recordings.

Everything is a tensor; nothing raises in the graph, so it holds under XLA.
The host (`Instrumentation`) reads the flags and applies the policy.

Example:

>>> # Used through tfguard.guard(model) or tfguard.instrument(model); see there.
"""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf
from keras.src.losses import loss as loss_module
from keras.src.trainers.data_adapters import data_adapter_utils

from tfguard import tags
from tfguard.checks.contract import leaves
from tfguard.firewall import stats, taps

OUTPUT_KEY = "_tfguard"
# Counts of a data check that add up across replicas (min/max and shapes stay local).
_SUMMED = ("bad", "total", "nan", "posinf", "neginf")
HIST_BUCKETS = 30
NO_RATIO = -1.0  # update_ratio of a layer whose weights were all zero: left out on the host


@dataclasses.dataclass(frozen=True)
class Slot:
    """One flag of the step: which checkpoint, which tensor, which check."""

    checkpoint: str  # data | forward | loss | gradients
    where: str
    check: str


@dataclasses.dataclass
class Plan:
    """What the traced step computes, in output order (rebuilt at every trace)."""

    slots: list[Slot]
    finite_slots: list[int]  # indices into slots whose counts come lazily
    data_details: list[list[str]]  # per data slot: the detail names
    signal_keys: list[str]
    describe: list  # per data slot: the describe function
    hist_keys: list[str] = dataclasses.field(default_factory=list)
    recording: bool = False  # traced as the recording step (signals) or the plain one


def _layer_key(variable, model_name: str) -> str:
    """The layer a variable belongs to, named as the activation tags name it.

    Keras paths are `<layer>/<var>` or `<model>/<layer>/<var>` depending on
    the model type; the model's own name is dropped so `grad_norm/dense` and
    `activation/dead_fraction/dense` agree.
    """
    parts = (getattr(variable, "path", None) or variable.name).split("/")
    if len(parts) > 2 and parts[0] == model_name:
        parts = parts[1:]
    return "/".join(parts[:-1]) if len(parts) > 1 else parts[0]


def _float_leaves(value) -> list[tf.Tensor]:
    return [t for t in tf.nest.flatten(value) if isinstance(t, tf.Tensor) and t.dtype.is_floating]


def _every(step: tf.Tensor, every: int) -> tf.Tensor:
    if every <= 0:
        return tf.constant(False)
    return tf.equal(tf.math.floormod(step, every), 0)


def _all_reduce_sum(value: tf.Tensor) -> tf.Tensor:
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def apply_if(pred: tf.Tensor, optimizer, grads, variables) -> None:
    """Applies the gradients only when `pred` holds, in any replica context."""
    pairs = list(zip(grads, variables))

    def apply():
        optimizer.apply_gradients(pairs)
        return tf.constant(True)

    def skip():
        return tf.constant(False)

    if not tf.distribute.has_strategy() or tf.__internal__.distribute.strategy_supports_no_merge_call():
        tf.cond(pred, apply, skip)
        return

    def cross_replica(distribution, grads, pred):
        first = distribution.experimental_local_results(pred)[0]

        def apply_all():
            distribution.extended.call_for_each_replica(
                lambda g: optimizer.apply_gradients(list(zip(g, variables))), args=(grads,)
            )
            return tf.constant(True)

        tf.cond(first, apply_all, skip)

    tf.distribute.get_replica_context().merge_call(cross_replica, args=(list(grads), pred))


def make_step(model: keras.Model, inst) -> callable:
    """Builds the guarded/instrumented `train_step(data)` for `model`.

    Args:
        model: the compiled Keras model.
        inst: its `Instrumentation` (settings, and where the plan is kept).

    Returns:
        A function `data -> logs` for Keras's `make_train_function`. It
        traces the recording step when `inst.tracing_recording` is set (the
        host sets it around each call), the plain step otherwise.
    """

    def train_step(data):
        inst._prepare()  # host-side set-up, at trace time only
        recording = bool(inst.tracing_recording)
        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        config = inst.guard
        optimizer = model.optimizer
        step = tf.identity(optimizer.iterations)
        slots: list[Slot] = []
        oks: list[tf.Tensor] = []
        finite_tensors: list[tf.Tensor] = []
        finite_slots: list[int] = []
        data_values: list[dict] = []
        data_details: list[list[str]] = []
        describes = []

        def add_finite(checkpoint, where, tensor):
            finite_slots.append(len(slots))
            slots.append(Slot(checkpoint, where, "finite"))
            oks.append(tf.reduce_all(tf.math.is_finite(tensor)))
            finite_tensors.append(tensor)

        if config is not None and config.data is not None and inst.in_graph_batch:
            # The batch comes back to the host: only flags here; a failure is
            # worded there, from the batch itself (no counting on good steps).
            for target, check_name, ok in inst.contract.flags(x, y, sample_weight):
                slots.append(Slot("data", target, check_name))
                oks.append(ok)
        elif config is not None and config.data is not None:
            for result in inst.contract.evaluate(x, y, sample_weight):
                slots.append(Slot("data", result.target, result.check))
                oks.append(result.ok)
                values = {k: tf.cast(v, tf.float32) for k, v in result.tensors().items()}
                data_values.append(values)
                data_details.append(list(values))
                describes.append(result)

        batch = {
            k: v
            for k, v in (("x", x), ("y", y), ("sample_weight", sample_weight))
            if v is not None
        }
        y = _sanitize_labels(inst.contract, y) if config is not None else y
        want_signals = recording and (inst.scalars_every > 0 or inst.histograms_every > 0)
        layers_mode = config is not None and config.forward == "layers"
        tap_context = taps.recording() if (layers_mode or want_signals) else _nothing()
        with tf.GradientTape() as tape:
            with tap_context as tape_records:
                y_pred = model(x, training=True) if model._call_has_training_arg else model(x)
            loss = model._compute_loss(
                x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True
            )
            unscaled = loss_module.unscale_loss_for_distribution(loss)
            scaled = optimizer.scale_loss(loss) if optimizer is not None else loss
        records = tape_records.records if tape_records is not None else []

        if config is not None and config.forward != "off":
            if layers_mode:
                for layer, outputs in records:
                    outs = _float_leaves(outputs)
                    for index, tensor in enumerate(outs):
                        suffix = f" (output {index})" if len(outs) > 1 else ""
                        add_finite("forward", f"layer '{layer.name}'{suffix}", tensor)
            else:
                outs = _float_leaves(y_pred)
                for index, tensor in enumerate(outs):
                    suffix = f" {index}" if len(outs) > 1 else ""
                    add_finite("forward", f"model output{suffix}", tensor)
        if config is not None:
            add_finite("loss", "loss", loss)

        variables = model.trainable_weights
        grads = tape.gradient(scaled, variables)
        signal_grads = _unscaled(optimizer, grads) if want_signals else grads
        guard_grads = config is not None and not isinstance(
            optimizer, keras.optimizers.LossScaleOptimizer
        )
        sq_norms = []
        for variable, grad, signal_grad in zip(variables, grads, signal_grads):
            if grad is None:
                continue
            grad = tf.convert_to_tensor(grad)
            if want_signals:
                sq_norms.append(tf.reduce_sum(tf.square(tf.cast(signal_grad, tf.float32))))
            if guard_grads:
                add_finite("gradients", f"gradient of '{variable.path}'", grad)
        # The weights before the update (a reference: the update copies on write).
        before = _weights_before(variables) if want_signals and inst.weight_signals else None

        outputs: dict[str, tf.Tensor] = {}
        if config is not None and inst.in_graph_batch:
            outputs["batch"] = batch  # for the quarantine; a handle, not a copy
        if slots:
            ok_vector = tf.stack(oks)
            failures = _all_reduce_sum(tf.cast(tf.logical_not(ok_vector), tf.float32))
            failed = failures > 0
            must_skip = tf.constant(False)
            for index, slot in enumerate(slots):
                if slot.checkpoint in ("loss", "gradients") or slot.check == "labels":
                    must_skip = must_skip | failed[index]
            any_failed = tf.reduce_any(failed)
            skip = must_skip if config.policy == "warn" else any_failed
            apply = tf.logical_not(skip)
            outputs["failures"] = failures
            outputs["applied"] = tf.cast(apply, tf.float32)
            if finite_tensors:
                local_failed = tf.logical_not(tf.reduce_all(tf.stack([oks[i] for i in finite_slots])))

                def counts():
                    rows = []
                    for tensor in finite_tensors:
                        t = tf.cast(tensor, tf.float32)
                        rows.append(
                            tf.stack(
                                [
                                    tf.reduce_sum(tf.cast(tf.math.is_nan(t), tf.float32)),
                                    tf.reduce_sum(tf.cast(tf.equal(t, float("inf")), tf.float32)),
                                    tf.reduce_sum(tf.cast(tf.equal(t, float("-inf")), tf.float32)),
                                    tf.cast(tf.size(t), tf.float32),
                                ]
                            )
                        )
                    return tf.stack(rows)

                zeros = tf.zeros([len(finite_tensors), 4])
                outputs["finite_counts"] = _all_reduce_sum(tf.cond(local_failed, counts, lambda: zeros))
            if data_values:
                outputs["data_values"] = {  # keyed by position: Keras wraps outputs in an Optional
                    str(i): {k: _all_reduce_sum(v) if k in _SUMMED else v for k, v in values.items()}
                    for i, values in enumerate(data_values)
                }
            apply_if(apply, optimizer, grads, variables)
        else:
            apply = tf.constant(True)
            optimizer.apply_gradients(zip(grads, variables))

        def update_metrics():
            model._loss_tracker.update_state(
                unscaled,
                sample_weight=tf.shape(next(i for i in tf.nest.flatten(x) if i is not None))[0],
            )
            model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)
            return tf.constant(True)

        if slots:
            tf.cond(apply, update_metrics, lambda: tf.constant(False))
        else:
            update_metrics()

        # The global step after the update (read after it: TensorFlow orders the read
        # after the write). The host keeps its schedule on it; an update a
        # LossScaleOptimizer dropped, or the guard skipped, did not move it.
        outputs["iterations"] = tf.identity(optimizer.iterations)
        signal_keys: list[str] = []
        hist_keys: list[str] = []
        if want_signals:
            signals, hists = _signal_fns(model, inst, x, y, variables, signal_grads, sq_norms, records, before)
            signal_keys, hist_keys = list(signals), list(hists)
            record_scalars = _every(step, inst.scalars_every)
            record_hists = _every(step, inst.histograms_every)
            outputs["record_scalars"] = tf.cast(record_scalars, tf.float32)
            outputs["record_histograms"] = tf.cast(record_hists, tf.float32)
            # One stacked tensor each (keys in the plan): few outputs, cheap steps.
            if signals:
                outputs["signals"] = tf.cond(
                    record_scalars,
                    lambda: tf.stack([tf.cast(fn(), tf.float32) for fn in signals.values()]),
                    lambda: tf.zeros([len(signals)]),
                )
            if hists:
                outputs["histograms"] = tf.cond(
                    record_hists,
                    lambda: tf.stack([fn() for fn in hists.values()]),
                    lambda: tf.zeros([len(hists), HIST_BUCKETS, 3]),
                )

        inst._set_plan(Plan(slots, finite_slots, data_details, signal_keys, describes, hist_keys, recording))
        logs = model.get_metrics_result()
        logs[OUTPUT_KEY] = outputs
        return logs

    return train_step


def _sanitize_labels(contract, y):
    """Clips class ids into range so a bad label cannot crash the loss kernel.

    TensorFlow's sparse cross-entropy kernel fails the whole step on a label
    outside `[0, classes)` (on CPU) or returns NaN (on GPU); the data check
    has already flagged it, and a step with a bad label is never applied.
    """
    from tfguard.checks.labels import Labels

    if contract is None or not isinstance(y, tf.Tensor):
        return y
    for check in contract.checks["y"]:
        if isinstance(check, Labels):
            high = tf.cast(check.num_classes - 1, y.dtype)
            return tf.clip_by_value(y, tf.zeros_like(high), high)
    return y


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _unscaled(optimizer, grads) -> list:
    """The gradients as the signals report them: divided by a LossScaleOptimizer's scale.

    The tape differentiates the scaled loss; `grad_norm/*` and the gradient
    histograms describe the true gradients (the optimizer unscales them too).
    """
    if not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return grads
    scale = optimizer.dynamic_scale if optimizer.built else optimizer.initial_scale
    scale = tf.identity(tf.convert_to_tensor(scale))  # the scale of this step's loss, before the update
    return [None if g is None else tf.convert_to_tensor(g) / tf.cast(scale, tf.convert_to_tensor(g).dtype)
            for g in grads]


def _is_float(variable) -> bool:
    """Whether a (Keras or TensorFlow) variable holds floats (Keras spells dtypes as strings)."""
    try:
        return tf.as_dtype(variable.dtype).is_floating
    except TypeError:
        return False


def _weights_before(variables) -> list[tf.Tensor | None]:
    """Each float trainable variable's value before the update (`None` for the others)."""
    return [tf.identity(tf.convert_to_tensor(v)) if _is_float(v) else None for v in variables]


def _weight_signals(model, variables, before, signals) -> None:
    """`weight_norm/<layer>` and `update_ratio/<layer>` thunks.

    They read the variables after the update (the thunks run in branches
    traced after it; TensorFlow orders the reads after the writes). A layer
    whose weights were exactly zero before has no ratio: it is written as
    -1 and the host leaves it out.
    """
    by_layer: dict[str, list[int]] = {}
    for index, variable in enumerate(variables):
        if before[index] is not None:
            by_layer.setdefault(_layer_key(variable, model.name), []).append(index)

    def norms(positions):
        after = [tf.cast(tf.convert_to_tensor(variables[i]), tf.float32) for i in positions]
        old = [tf.cast(before[i], tf.float32) for i in positions]
        weight = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(w)) for w in after]))
        delta = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(w - b)) for w, b in zip(after, old)]))
        base = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(b)) for b in old]))
        ratio = tf.where(tf.equal(base, 0.0), tf.constant(NO_RATIO), delta / base)
        return weight, ratio

    for layer, positions in by_layer.items():
        computed: dict = {}

        def pick(which, p=positions, c=computed):
            # weight and ratio thunks run in one branch graph: one computation there
            if "norms" not in c:
                c["norms"] = norms(p)
            return c["norms"][which]

        signals[tags.weight_norm(layer)] = lambda f=pick: f(0)
        signals[tags.update_ratio(layer)] = lambda f=pick: f(1)


def _signal_fns(model, inst, x, y, variables, grads, sq_norms, records, before=None):
    """Builds `tag -> thunk` maps for scalar signals and histograms."""
    signals: dict[str, callable] = {}
    hists: dict[str, callable] = {}
    by_layer: dict[str, list[int]] = {}
    present = [i for i, g in enumerate(grads) if g is not None]
    for position, index in enumerate(present):
        by_layer.setdefault(_layer_key(variables[index], model.name), []).append(position)
    signals[tags.GLOBAL_GRAD_NORM] = lambda: tf.sqrt(tf.add_n(sq_norms)) if sq_norms else 0.0
    for layer, positions in by_layer.items():
        signals[tags.grad_norm(layer)] = lambda p=positions: tf.sqrt(tf.add_n([sq_norms[i] for i in p]))
        members = [tf.convert_to_tensor(grads[present[i]]) for i in positions]
        signals[tags.zero_grad_fraction(layer)] = lambda m=members: stats.zero_fraction(m)
    inputs = [t for _, t in leaves("x", x) if t.dtype.is_floating or t.dtype.is_integer]
    if inputs:
        first, computed = inputs[0], {}

        def moment(key):
            # The four thunks run in one branch graph: compute the moments once there.
            if "moments" not in computed:
                computed["moments"] = stats.moments(first)
            return computed["moments"][key]

        for key, tag in (
            ("min", tags.INPUT_MIN),
            ("max", tags.INPUT_MAX),
            ("mean", tags.INPUT_MEAN),
            ("std", tags.INPUT_STD),
        ):
            signals[tag] = lambda k=key: moment(k)
    targets = [t for _, t in leaves("y", y) if t.dtype.is_floating or t.dtype.is_integer]
    if targets:
        signals[tags.LABEL_MIN] = lambda t=targets[0]: tf.reduce_min(tf.cast(t, tf.float32))
        signals[tags.LABEL_MAX] = lambda t=targets[0]: tf.reduce_max(tf.cast(t, tf.float32))
    seen: set[str] = set()
    for layer, outputs in records:
        outs = _float_leaves(outputs)
        if not outs or layer.name in seen:
            continue
        seen.add(layer.name)
        kind = stats.activation_kind(layer)
        if kind == "relu":
            signals[tags.dead_fraction(layer.name)] = lambda t=outs[0]: stats.dead_fraction(t)
        elif kind in stats.SATURATING:
            signals[tags.saturated_fraction(layer.name)] = (
                lambda t=outs[0], k=kind: stats.saturated_fraction(t, k)
            )
        if inst.histograms_every > 0 and inst.histogram_activations:
            hists[tags.hist_activations(layer.name)] = lambda t=outs[0]: stats.buckets(
                stats.leading_examples(t), HIST_BUCKETS, xla=bool(model.jit_compile)
            )
    if inst.histograms_every > 0 and inst.histogram_gradients:
        for index in present:
            grad = tf.convert_to_tensor(grads[index])
            hists[tags.hist_gradients(variables[index].path)] = lambda g=grad: stats.buckets(
                g, HIST_BUCKETS, xla=bool(model.jit_compile)
            )
    if before is not None:
        _weight_signals(model, variables, before, signals)
    if inst.histograms_every > 0 and inst.histogram_weights:
        for variable in model.weights:  # after the update, non-trainable ones too
            if _is_float(variable):
                hists[tags.hist_weights(variable.path)] = lambda v=variable: stats.buckets(
                    tf.convert_to_tensor(v), HIST_BUCKETS, xla=bool(model.jit_compile)
                )
    return signals, hists
