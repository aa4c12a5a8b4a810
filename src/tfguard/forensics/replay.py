"""Replay a quarantined batch eagerly and name the first layer, variable and op at fault.

The replay loads the batch and the weights in use, runs the forward pass
eagerly with a tap on every (nested) layer, computes the loss and the
gradients, and reports:

* the first layer (in completion order) whose output is non-finite;
* the first trainable variable whose gradient is non-finite;
* the type of the op that produced the first NaN/Inf, found by re-running
  under `tf.debugging.enable_check_numerics()` (fine here: a replay is
  eager and never XLA-compiled).

The model's weights are restored afterwards, so a replay never changes it.

Example (a layer takes the log of a negative input: caught, saved, replayed):

>>> import keras, numpy as np, tempfile, warnings, tfguard
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2, name="dense"),
...                           keras.layers.Lambda(keras.ops.log, name="log")])
>>> model.compile(optimizer="sgd", loss="mse")
>>> model = tfguard.guard(model, policy="skip", quarantine_dir=tempfile.mkdtemp())
>>> x = -np.abs(np.random.default_rng(0).normal(size=(4, 2))).astype("float32")
>>> model.layers[0].set_weights([np.eye(2, dtype="float32"), np.zeros(2, "float32")])
>>> _ = model.fit(x, np.zeros((4, 2)), batch_size=4, verbose=0)
>>> path = tfguard.guard_events(model)[0].quarantine
>>> report = replay(path, model=model)  # a Lambda layer: pass the model (safe_mode cannot load it)
>>> report.first_layer, report.op_type
('log', 'Log')
"""

from __future__ import annotations

import dataclasses
import re

import keras
import numpy as np
import tensorflow as tf

from tfguard.errors import QuarantineError
from tfguard.firewall import taps
from tfguard.forensics.quarantine import load_quarantine

_OP = re.compile(r'in output (\d+) of (?:eagerly-executing|graph) op "([^"]+)"')
_COUNT = re.compile(r"# of ([+-]?(?:Inf|NaN)) elements: (\d+)")
_LAYER = re.compile(r"Exception encountered when calling (\w+)\.call")


@dataclasses.dataclass
class ReplayReport:
    """What a replay found.

    Args:
        path: the quarantine folder.
        step: the training step of the batch.
        loss: the replayed loss value.
        first_layer: the first layer whose output is non-finite, or `None`.
        first_layer_output: which output of that layer. Defaults to `0`.
        first_variable: the first variable whose gradient is non-finite, or `None`.
        variable_counts: NaN/+Inf/-Inf counts of that gradient.
        op_type: the TensorFlow op type that produced the first NaN/Inf, or `None`.
        op_output: which output of that op.
        op_detail: the counts check_numerics reported.
        nonfinite_layers: every layer with a non-finite output, in order.
        nonfinite_variables: every variable with a non-finite gradient.
    """

    path: str
    step: int
    loss: float
    first_layer: str | None = None
    first_layer_output: int = 0
    first_variable: str | None = None
    variable_counts: dict = dataclasses.field(default_factory=dict)
    op_type: str | None = None
    op_output: int | None = None
    op_detail: str = ""
    nonfinite_layers: list = dataclasses.field(default_factory=list)
    nonfinite_variables: list = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        """A few lines for a person: layer, variable, op."""
        lines = []
        if self.first_layer:
            lines.append(
                f"First non-finite layer on replay: '{self.first_layer}' (output {self.first_layer_output})."
            )
        if self.op_type:
            lines.append(
                f"First op producing NaN/Inf: {self.op_type} (output {self.op_output}){self.op_detail}."
            )
        if self.first_variable:
            counts = self.variable_counts
            lines.append(
                f"First variable with a non-finite gradient: '{self.first_variable}' "
                f"({counts.get('nan', 0)} NaN, {counts.get('posinf', 0)} +Inf, "
                f"{counts.get('neginf', 0)} -Inf)."
            )
        if not lines:
            lines.append(
                f"Replay found no non-finite value (loss {self.loss:.6g}): the violation came "
                "from a data check, or from randomness (dropout) that did not repeat."
            )
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _nonfinite(value) -> bool:
    return any(
        t.dtype.is_floating and not bool(tf.reduce_all(tf.math.is_finite(t)))
        for t in tf.nest.flatten(value)
        if isinstance(t, tf.Tensor)
    )


def _counts(tensor) -> dict:
    t = np.asarray(tensor, dtype=np.float64)
    return {
        "nan": int(np.isnan(t).sum()),
        "posinf": int(np.isposinf(t).sum()),
        "neginf": int(np.isneginf(t).sum()),
        "total": int(t.size),
    }


def _forward_backward(model, x, y, sample_weight):
    with tf.GradientTape() as tape:
        with taps.recording() as tape_records:
            y_pred = model(x, training=True) if model._call_has_training_arg else model(x)
        loss = model._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
    grads = tape.gradient(loss, model.trainable_weights)
    return tape_records.records, loss, grads


def replay(path: str, model: keras.Model | None = None, custom_objects=None) -> ReplayReport:
    """Re-runs a quarantined batch eagerly and localizes the first NaN/Inf.

    Example:

    >>> # print(tfguard.replay("tfguard-quarantine/net/step-00000007").summary())

    Args:
        path: a quarantine folder.
        model: the model to replay on (its weights are set from the
            quarantine and restored after). `None` loads the saved
            `model.keras`. Defaults to `None`.
        custom_objects: for loading a model with custom layers. Defaults to `None`.

    Returns:
        A `ReplayReport`.

    Raises:
        QuarantineError: for a bad folder, a model that cannot be loaded, or
            weights that do not fit the model.
    """
    quarantine = load_quarantine(path)
    if model is None:
        model = quarantine.load_model(custom_objects=custom_objects)
    variables = list(model.weights)
    if len(variables) != len(quarantine.weights):
        raise QuarantineError(
            f"The model has {len(variables)} variables but the quarantine {path} saved "
            f"{len(quarantine.weights)}.",
            hint="replay on the model that was training when the violation happened",
        )
    saved = [v.numpy() for v in variables]
    layers = taps.tappable_layers(model, recursive=True)
    added = [layer for layer in layers if taps._MARK not in layer.__dict__]
    taps.install(added)
    try:
        for variable, value in zip(variables, quarantine.weights.values()):
            variable.assign(value)
        records, loss, grads = _forward_backward(
            model, quarantine.x, quarantine.y, quarantine.sample_weight
        )
        report = ReplayReport(path=path, step=int(quarantine.meta["step"]), loss=float(loss))
        for layer, outputs in records:
            flat = [t for t in tf.nest.flatten(outputs) if isinstance(t, tf.Tensor)]
            for index, tensor in enumerate(flat):
                if tensor.dtype.is_floating and _nonfinite(tensor):
                    if report.first_layer is None:
                        report.first_layer, report.first_layer_output = layer.name, index
                    if layer.name not in report.nonfinite_layers:
                        report.nonfinite_layers.append(layer.name)
        for variable, grad in zip(model.trainable_weights, grads):
            if grad is not None and _nonfinite(tf.convert_to_tensor(grad)):
                name = getattr(variable, "path", variable.name)
                if report.first_variable is None:
                    report.first_variable = name
                    report.variable_counts = _counts(grad)
                report.nonfinite_variables.append(name)
        if report.first_layer or report.first_variable or not np.isfinite(report.loss):
            for variable, value in zip(variables, quarantine.weights.values()):
                variable.assign(value)
            _find_op(model, quarantine, report)
        return report
    finally:
        for variable, value in zip(variables, saved):
            variable.assign(value)
        taps.uninstall(added)


def _find_op(model, quarantine, report: ReplayReport) -> None:
    tf.debugging.enable_check_numerics()
    try:
        _forward_backward(model, quarantine.x, quarantine.y, quarantine.sample_weight)
    except tf.errors.InvalidArgumentError as error:
        text = str(error)
        match = _OP.search(text)
        if match:
            report.op_output, report.op_type = int(match.group(1)), match.group(2)
            counts = ", ".join(f"{n} {kind}" for kind, n in _COUNT.findall(text))
            layer = _LAYER.search(text)
            where = f" in {layer.group(1)}.call" if layer else ""
            report.op_detail = f"{where}{': ' + counts if counts else ''}"
    finally:
        tf.debugging.disable_check_numerics()
