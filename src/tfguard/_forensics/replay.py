"""Replay a quarantined batch eagerly and name the first layer, variable and op at fault.

The replay loads the batch and the weights in use, runs the model's own
train step eagerly (Keras's or an override: a GAN's, a VAE's) with a tap on
every (nested) layer and the optimizer's apply intercepted to record the gradients, and
reports:

* the first layer (in completion order) whose output is non-finite;
* the first trainable variable whose gradient is non-finite;
* the type of the op that produced the first NaN/Inf, found by re-running
  under `tf.debugging.enable_check_numerics()` (fine here: a replay is
  eager and never XLA-compiled).

Every variable of the model, its metrics and its optimizers is restored
afterwards, so a replay never changes the model.

`replay(path)` is also what `tfguard replay PATH` runs: without a model it
loads the saved `model.keras`; when that cannot be loaded (a model whose
classes live in the training script) it returns the replay made with the
live model when the batch was saved, says so (`source == "stored"`,
`load_error`, the first line of `summary()`) and warns
(`StoredReplayWarning`).

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
import warnings

import keras
import numpy as np
import tensorflow as tf

from tfguard._errors import QuarantineError
from tfguard._forensics import spike_replay
from tfguard._forensics.examples import describe_rows, rows_at_fault
from tfguard._forensics.quarantine import load_quarantine
from tfguard._hooks import dry_run, keras_compat, taps
from tfguard._hooks.context import ORIGINAL_STEP, StepContext
from tfguard._hooks.transaction import Transaction
from tfguard.checks._values import finite

_OP = re.compile(r'in output (\d+) of (?:eagerly-executing|graph) op "([^"]+)"')
_COUNT = re.compile(r"# of ([+-]?(?:Inf|NaN)) elements: (\d+)")
_LAYER = re.compile(r"Exception encountered when calling (\w+)\.call")


class StoredReplayWarning(UserWarning):
    """`replay` returned the replay stored with the batch: the saved model could not be loaded."""


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
        examples: the rows of the batch at fault: those a failed data check rejected
            (as the quarantine named them), else the rows of the first non-finite
            layer's output that hold a NaN/Inf (`bad` of its `values`).
        spike_signal: for a spike (`tfguard._forensics.spike_replay`), the signal that spiked.
        spike_recorded: its value when the step ran.
        spike_replayed: its value on replay.
        spike_threshold: the window's threshold it crossed.
        verdict: `"reproduces"` (the batch causes it) or `"transient"`; `None` when it cannot be told.
        verdict_note: why there is no verdict.
        example_losses: `[row, loss]` of the batch's examples, the largest loss first (at most 10).
        losses_note: why there are no per-example losses.
        driving_rows: the fewest rows whose removal brings the replayed signal under the threshold.
        replayed_without: the replayed signal without those rows.
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
    examples: list = dataclasses.field(default_factory=list)
    source: str = "replayed"  # or "stored": the live model's replay, kept when the batch was saved
    load_error: str = ""  # why the saved model could not be loaded (a stored report)
    spike_signal: str | None = None
    spike_recorded: float | None = None
    spike_replayed: float | None = None
    spike_threshold: float | None = None
    verdict: str | None = None
    verdict_note: str = ""
    example_losses: list = dataclasses.field(default_factory=list)
    losses_note: str = ""
    driving_rows: list = dataclasses.field(default_factory=list)
    replayed_without: float | None = None

    def summary(self) -> str:
        """A few lines for a person: layer, variable, op."""
        lines = []
        if self.first_layer:
            lines.append(
                f"First non-finite layer on replay: '{self.first_layer}' (output {self.first_layer_output})."
            )
        if self.examples:
            lines.append(f"Examples at fault: {describe_rows(self.examples, None).removeprefix('in ')}.")
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
        if self.spike_signal is not None:
            lines += spike_replay.summary_lines(self)
        if self.source == "stored":
            lines.insert(0, "Replayed with the live model when the batch was saved (the saved model "
                         "cannot be loaded here: its classes are defined in the training script).")
            lines.append(f"To re-run: tfguard replay {self.path} --import FILE.py (the file that "
                         "defines the layers, and does not train on import).")
        if not lines:
            lines.append(
                f"Replay found no non-finite value (loss {self.loss:.6g}): the violation came "
                "from a data check, or from randomness (dropout) that did not repeat."
            )
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> ReplayReport:
        """A report read back from JSON (`replay.json`); unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in values.items() if k in names}
        return cls(**{"path": "", "step": 0, "loss": float("nan"), **known})


def _named_rows(quarantine) -> list[dict]:
    """The rows the quarantine's failed data check named (`row`, `bad`, `values`)."""
    named = quarantine.meta.get("examples") or []
    return [{k: row[k] for k in ("row", "bad", "values")} for row in named
            if isinstance(row, dict) and all(isinstance(row.get(k), int) for k in ("row", "bad", "values"))]


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


def own_step(model: keras.Model):
    """The model's own `train_step`, under any step tfguard wrapped around it."""
    step = model.train_step
    return getattr(step, ORIGINAL_STEP, step)


def _batch(quarantine):
    """The batch as Keras handed it to the step: `x`, `(x, y)` or `(x, y, sample_weight)`."""
    parts = [quarantine.x, quarantine.y, quarantine.sample_weight]
    while len(parts) > 1 and parts[-1] is None:
        parts.pop()
    converted = [tf.nest.map_structure(tf.convert_to_tensor, p) if p is not None else None
                 for p in parts]
    return converted[0] if len(converted) == 1 else tuple(converted)


def _run_step(model, step_fn, data):
    """Runs the step eagerly; returns `(tape records, StepContext, logs, error)`."""
    context = StepContext(model)
    logs, error = None, None
    with context.active(), taps.recording() as tape:
        try:
            logs = step_fn(data)
        except (tf.errors.InvalidArgumentError, ValueError, TypeError, NotImplementedError) as raised:
            error = raised
    return tape.records, context, logs, error


def _forward_only(model, data):
    """A forward pass with taps, for a model whose step cannot run (not compiled)."""
    x, _, _ = keras_compat.unpack(data)
    with taps.recording() as tape:
        model(x, training=True) if keras_compat.call_has_training_arg(model) else model(x)
    return tape.records


def _loss_of(context, logs) -> float:
    if context.losses:
        return float(context.losses[0].loss)
    if isinstance(logs, dict) and "loss" in logs:
        return float(logs["loss"])
    return float("nan")


def replay(path: str, model: keras.Model | None = None, custom_objects=None,
           step_fn=None, *, imports=()) -> ReplayReport:
    """Re-runs a quarantined batch eagerly through the model's own step and localizes the first NaN/Inf.

    The step (Keras's `train_step` or the model's override) runs eagerly on
    the batch with the weights in use, with a tap on every nested layer and
    the optimizer's apply intercepted to record the gradients; then every variable of
    the model, its metrics and its optimizers is put back bitwise.

    Without `model`, the saved `model.keras` is loaded (`safe_mode=True`,
    with `custom_objects` and the classes the files of `imports` define).
    When it cannot be loaded and the live model's replay was stored with the
    batch, that one is returned, as `tfguard replay PATH` shows it:
    `source == "stored"`, `load_error` says why, and a `StoredReplayWarning`
    says how to re-run it.

    Example:

    >>> replay("no/such/quarantine")
    Traceback (most recent call last):
    ...
    tfguard._errors.QuarantineError: Received an invalid quarantine folder 'no/such/quarantine': 'meta.json' is missing, expected meta.json, batch.npz and weights.npz.
    Try: pass a folder printed by a GuardViolation, e.g. tfguard-quarantine/<model>/batch-N

    Args:
        path: a quarantine folder.
        model: the model to replay on (its weights are set from the
            quarantine and everything is restored after). `None` loads the
            saved `model.keras`. Defaults to `None`.
        custom_objects: for loading a model with custom layers. Defaults to `None`.
        step_fn: the step to run. Defaults to `None` (the model's own `train_step`).
        imports: Python files that define the model's classes (`tfguard
            replay PATH --import FILE.py`), imported to load the saved model.
            Defaults to `()`.

    Returns:
        A `ReplayReport`: `source == "replayed"`, or `"stored"` when the saved
        model could not be loaded and the live model's replay was kept.

    Raises:
        QuarantineError: for a bad folder (one whose `meta.json` points outside
            it is refused even with a stored replay), a model that cannot be
            loaded with no stored replay, or weights that do not fit the model.
    """
    quarantine = load_quarantine(path)
    if model is None:
        quarantine.model_path()  # a folder crafted to point outside itself is refused, stored replay or not
        try:
            objects = {**definitions(imports), **(custom_objects or {})}
            model = quarantine.load_model(custom_objects=objects or None)
        except QuarantineError as error:
            report = _stored(quarantine, path, error)
            if report is None:
                raise
            warnings.warn(StoredReplayWarning(
                f"The model saved in {path} cannot be loaded here ({short_reason(error.message)}); "
                "returning the replay the live model made when the batch was saved "
                "(report.load_error has the whole error).\nTo re-run it: tfguard.replay(path, "
                "imports=['FILE.py']) with the file that defines the layers, or "
                "tfguard.replay(path, model=my_model)."), stacklevel=2)
            return report
    variables = list(model.weights)
    if len(variables) != len(quarantine.weights):
        raise QuarantineError(
            f"The model has {len(variables)} variables but the quarantine {path} saved "
            f"{len(quarantine.weights)}.",
            hint="replay on the model that was training when the violation happened",
        )
    step_fn = step_fn or own_step(model)
    data = _batch(quarantine)
    state = Transaction()
    state.hold(model.variables)
    state.hold(model.metrics_variables)
    state.hold(dry_run.optimizer_slots(model))
    added = taps.tap(model)

    def load_weights():
        for variable, value in zip(variables, quarantine.weights.values()):
            variable.assign(value)

    try:
        load_weights()
        records, context, logs, error = _run_step(model, step_fn, data)
        if error is not None and not context.updates and not context.losses:
            records = _forward_only(model, data)
        report = ReplayReport(path=path, step=int(quarantine.meta["step"]),
                              loss=_loss_of(context, logs), examples=_named_rows(quarantine))
        for layer, outputs in records:
            flat = [t for t in tf.nest.flatten(outputs) if isinstance(t, tf.Tensor)]
            for index, tensor in enumerate(flat):
                if tensor.dtype.is_floating and _nonfinite(tensor):
                    if report.first_layer is None:
                        report.first_layer, report.first_layer_output = layer.name, index
                        report.examples = report.examples or rows_at_fault(finite(), tensor)
                    if layer.name not in report.nonfinite_layers:
                        report.nonfinite_layers.append(layer.name)
        for update in context.updates:
            for variable, grad in zip(update.variables, update.unscaled()):
                if grad is not None and _nonfinite(tf.convert_to_tensor(grad)):
                    name = getattr(variable, "path", variable.name)
                    if report.first_variable is None:
                        report.first_variable = name
                        report.variable_counts = _counts(grad)
                    if name not in report.nonfinite_variables:
                        report.nonfinite_variables.append(name)
        if report.first_layer or report.first_variable or not np.isfinite(report.loss):
            state.restore_if(tf.constant(True))
            load_weights()
            _find_op(model, step_fn, data, report)
        if quarantine.meta.get("stage") == spike_replay.SPIKE:
            def run_step(batch):
                state.restore_if(tf.constant(True))
                load_weights()
                return _run_step(model, step_fn, batch)[1]

            spike_replay.judge(report, quarantine.meta, model, context, run_step, data)
        return report
    finally:
        state.restore_if(tf.constant(True))
        taps.uninstall(added)


def _find_op(model, step_fn, data, report: ReplayReport) -> None:
    tf.debugging.enable_check_numerics()
    try:
        _, _, _, error = _run_step(model, step_fn, data)
    finally:
        tf.debugging.disable_check_numerics()
    if not isinstance(error, tf.errors.InvalidArgumentError):
        return
    text = str(error)
    match = _OP.search(text)
    if match:
        op_type = match.group(2)
        if op_type.startswith(("b'", 'b"')) and op_type[-1:] in ("'", '"'):
            op_type = op_type[2:-1]  # some TensorFlow paths print the op type as bytes
        report.op_output, report.op_type = int(match.group(1)), op_type
        counts = ", ".join(f"{n} {kind}" for kind, n in _COUNT.findall(text))
        layer = _LAYER.search(text)
        where = f" in {layer.group(1)}.call" if layer else ""
        report.op_detail = f"{where}{': ' + counts if counts else ''}"


def definitions(files) -> dict:
    """The Keras classes a training script defines, as `custom_objects` (imports each file).

    The file runs as a module named `tfguard_definitions_<n>`: a script that
    trains at import (no `if __name__ == "__main__":` guard) trains here too.

    Raises:
        QuarantineError: for a file that does not exist or fails to import.
    """
    import importlib.util
    import inspect
    import os
    import sys

    found: dict = {}
    for number, file in enumerate(files):
        if not os.path.isfile(file):
            raise QuarantineError(f"Received --import {file!r}, expected a Python file that "
                                  "defines the model's layers.")
        name = f"tfguard_definitions_{number}"
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            raise QuarantineError(f"Importing {file} failed: {type(error).__name__}: {error}",
                                  hint="import a module that defines the layers without training "
                                  "at import time") from error
        for key, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, (keras.layers.Layer, keras.losses.Loss,
                                                            keras.metrics.Metric,
                                                            keras.optimizers.Optimizer)):
                found[key] = value
    return found


REASON_LIMIT = 160
"""Characters of a load error a warning quotes; the report keeps the whole error."""


def short_reason(message: str, limit: int = REASON_LIMIT) -> str:
    """The first line of an error, cut at a word before `limit` characters (a Keras load error
    can hold the whole model config).

    Example:

    >>> short_reason("Could not locate class 'Block'. Make sure custom classes ... " + "x " * 200, 40)
    "Could not locate class 'Block'. Make..."
    """
    first = str(message).strip().splitlines()[0] if str(message).strip() else ""
    if len(first) <= limit:
        return first
    cut = first[: limit - 3].rsplit(" ", 1)[0]
    return cut + "..."


def _stored(quarantine, path: str, error: QuarantineError) -> ReplayReport | None:
    """The live model's replay kept with the batch, marked stored with why the model did not load."""
    stored = quarantine.stored_replay()
    if stored is None:
        return None
    report = ReplayReport.from_dict(stored["report"])
    report.path, report.source = path, "stored"
    report.op_detail = report.op_detail or ""
    report.load_error = error.message
    return report
