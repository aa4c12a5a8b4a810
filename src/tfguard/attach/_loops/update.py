"""One update of a hand-written loop, recorded at the optimizer's apply on the steps that record.

At an update the loop recorder (`tfguard.attach._loops.recorder`) knows the
run it belongs to and the window of what the loop computed before it.
`record_update` then, in the loop's own step (traced or eager):

1. reads the run's step (its first optimizer's `iterations`) and decides
   whether the step records (`emit.due_at`: the Logger's schedule);
2. lets the update through a `FirewallContext` that does not guard
   (`tfguard._firewall.apply_interception`): on recording steps it takes the gradients'
   norms at the apply and the weights before the write, as a fit's
   recording step does, and the update goes on to the interceptors inside it
   (the firewall's gate) and is written;
3. after the write, reads whether the update moved its optimizer's step
   (a rejected one did not), and on a recording step, or a rejected one,
   computes in one branch: the gradient signals (`grad_norm/<layer>`,
   `zero_grad_fraction/<layer>`), the weight norms and update ratios, the
   batch's and labels' statistics (`data/input_*`: the step's first
   numeric argument, or the eager model's input; `data/label_*`: the
   targets of the loss), the activations (`activation/dead_fraction/<layer>`
   and `saturated_fraction`: the graph's activation operations, or the
   eager tape's layer outputs), the loss values and the metric results the
   window holds; and hands them to the run (`emit.emit`).

`record_metric` reads a metric updated after the step's update in the
same traced function, where it is.

Example (through the recorder, which is how an update reaches it):

>>> import keras, numpy as np, tensorflow as tf
>>> from tfguard.attach._loops.recorder import LoopRecorder
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="relu", name="hidden")], name="m")
>>> optimizer, loss_fn = keras.optimizers.SGD(0.1), keras.losses.MeanSquaredError()
>>> recorder = LoopRecorder(logdir=None, dense_steps=20).start()
>>> for _ in range(2):
...     with tf.GradientTape() as tape:
...         loss = loss_fn(np.ones((4, 2)), model(np.ones((4, 3), "float32")))
...     optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
>>> (record,) = recorder.close(first_index=1)
>>> signals = record.diagnosis.signals
>>> record.run, signals.series("batch/loss").steps.tolist(), "update_ratio/hidden" in signals.scalars
('m-loop', [1, 2], True)
"""

from __future__ import annotations

import keras
import tensorflow as tf

from tfguard import _tags
from tfguard._firewall.apply_interception import FirewallContext
from tfguard._firewall.config import HOLD_BYTES
from tfguard._optimizer_state import step_counter
from tfguard._signals import probes, stats
from tfguard._signals.probes import Group
from tfguard.attach._loops.emit import due_at, emit
from tfguard.attach._loops.graph_inputs import activation_outputs, batch_arguments, operation_count
from tfguard.attach._loops.run import LossKey
from tfguard.attach._loops.windows import Observation
from tfguard.checks._contract import float_leaves


def _read(counter, eager: bool):
    value = tf.convert_to_tensor(counter.value if isinstance(counter, keras.Variable) else counter)
    return int(value.numpy()) if eager else tf.identity(value)


def _scale(optimizer):
    """The loss scale a `LossScaleOptimizer`'s gradients carry, else `None`."""
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer) and optimizer.built:
        return tf.identity(tf.convert_to_tensor(optimizer.dynamic_scale))
    return None


def observation_groups(observations, optimizer) -> list[Group]:
    """The loss values (keyed `LossKey(optimizer)`) and the metric results (`batch/<name>`) of a window."""
    groups = []
    for seen in observations:
        if seen.kind == "loss":
            value = seen.value
            groups.append(Group([LossKey(optimizer)],
                                lambda v=value: tf.reduce_mean(tf.cast(v, tf.float32))))
            continue
        result = seen.source.result()
        named = result.items() if isinstance(result, dict) else [(seen.source.name, result)]
        for name, value in named:
            value = tf.convert_to_tensor(value)
            if value.shape.rank == 0 and (value.dtype.is_floating or value.dtype.is_integer):
                groups.append(Group([_tags.batch(str(name))], lambda v=value: tf.cast(v, tf.float32)))
    return groups


def _vector(groups: list[Group]) -> tuple[list, tf.Tensor]:
    keys = [key for group in groups for key in group.tags]
    return keys, (probes.signals_of(groups) if groups else tf.zeros([0]))


def _batch(window, observations, tape_inputs, trained):
    """The batch whose scale `data/input_*` measures, and the targets of the first loss (or `None`s).

    Eagerly, the first input of a model this update trains (a GAN's discriminator, not its
    generator's noise), else of any model of the run.
    """
    targets = next((seen.y_true for seen in observations if seen.kind == "loss" and seen.y_true is not None), None)
    targets = float_leaves(targets)[0] if float_leaves(targets) else targets
    if window.eager:
        own = [x for model, x in tape_inputs if any(model is m for m in trained)]
        return (own or [x for _, x in tape_inputs] or [None])[0], targets
    if window.batch_taken:
        return None, targets
    window.batch_taken = True
    arguments = [t for t in batch_arguments(window.graph) if all(t is not y for y in tf.nest.flatten(targets))]
    return (arguments or None), targets


def _layer_name(layer, naming) -> str:
    weights = layer.weights
    return probes.layer_key(weights[0], naming.name) if weights else layer.name


def _activations(run, window, tape_outputs) -> list[tuple[str, str, tf.Tensor]]:
    """`(layer name, kind, output)` of the activations the step computed since the last update.

    The sigmoid or tanh a model's last layer ends with is its output, not a hidden activation (a
    GAN generator's saturates by design): left out, for each model of the run.
    """
    naming = run.naming
    outputs = {_layer_name(model.layers[-1], naming) for model in run.models if model.layers}
    if window.eager:
        named = []
        for layer, values in tape_outputs:
            kind = stats.activation_kind(layer)
            outs = float_leaves(values)
            if kind is not None and outs:
                named.append((_layer_name(layer, naming), kind, outs[0]))
    else:
        found = activation_outputs(window.graph, window.scanned, run.variables())
        window.scanned = operation_count(window.graph)
        named = [(probes.layer_key(variable, naming.name), kind, output) for variable, kind, output in found]
    return [item for item in named if not (item[1] in stats.SATURATING and item[0] in outputs)]


def _first_of_each(named: list) -> list:
    seen, kept = set(), []
    for item in named:
        if item[0] not in seen:
            seen.add(item[0])
            kept.append(item)
    return kept


def record_update(run, window, optimizer, gradients, variables, apply, observations, tape=None):
    """Lets one update through, recording it on the run's recording steps (see the module)."""
    eager = window.eager
    counter, own = step_counter(run.counting), step_counter(optimizer)
    start, own_before = _read(counter, eager), _read(own, eager)
    predicted = start + 1 if optimizer is run.counting else start
    due = due_at(predicted, run.dense_steps, run.every)
    outputs, inputs = tape.take() if (eager and tape is not None) else ([], [])
    if eager and not due:  # a step that does not record runs nothing of the recorder but two reads
        result = apply(gradients)
        if _read(own, eager) == own_before:
            run.receive(_read(counter, eager), False, [], [], optimizer)
        return result
    x, y = _batch(window, observations, inputs, run.models_of(optimizer))
    named = _first_of_each(_activations(run, window, outputs))
    context = FirewallContext(None, record_flag=due if not eager else tf.constant(due), weights=True,
                              hold_bytes=HOLD_BYTES)
    context.graph = window.graph
    result = context.intercept_apply(optimizer, gradients, variables, _scale(optimizer), apply)
    step, own_after = _read(counter, eager), _read(own, eager)
    moved = own_after > own_before
    records = (due or not moved) if eager else tf.logical_or(due, tf.logical_not(moved))
    naming = run.naming

    def compute():
        groups = [*probes.gradient_groups(naming, context), *probes.weight_groups(naming, context),
                  *probes.data_groups(x, y), *probes.activation_groups(named),
                  *observation_groups(observations, optimizer)]
        return _vector(groups)

    emit(records, step, moved, compute, lambda *args: run.receive(*args, optimizer))
    window.schedule = (step, due)
    return result


def record_metric(run, window, metric) -> None:
    """Reads a metric updated after an update in the same traced function, on the run's recording steps
    (the step and the decision of the last update of the function, when it was the run's)."""
    if window.schedule is not None and window.last_run is run:
        step, due = window.schedule
    else:
        step = _read(step_counter(run.counting), window.eager)
        due = due_at(step, run.dense_steps, run.every)
    emit(due, step, True,
         lambda: _vector(observation_groups([Observation("metric", metric)], None)),
         lambda *args: run.receive(*args, None))


__all__ = ["observation_groups", "record_metric", "record_update"]
