"""What a run says about itself: its configuration, model description, lint, guard events.

These are the text summaries of a run (`config/hparams`, `config/model`,
`config/lint`, `guard/events`), built here as plain strings and dicts; the
`Logger` writes them.

Example:

>>> import keras
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)], name="m")
>>> model.compile(optimizer="sgd", loss="mse")
>>> config = run_config(model, {"epochs": 2, "steps": 10})
>>> config["model"], config["optimizer"], config["loss"], config["epochs"]
('m', 'SGD', 'mse', 2)
"""

from __future__ import annotations

import json

import keras
import tensorflow as tf

from tfguard import _tags
from tfguard._findings import event_record, strict_json
from tfguard._optimizer_state import learning_rate
from tfguard.lint import describe_model, lint


def loss_name(loss) -> str | None:
    """A readable name for a compiled loss (string, function or `Loss` object).

    Example:

    >>> loss_name("mse"), loss_name(keras.losses.Huber())
    ('mse', 'huber_loss')
    """
    if loss is None or isinstance(loss, str):
        return loss
    return getattr(loss, "name", None) or getattr(loss, "__name__", None) or type(loss).__name__


def step_values(record, optimizer) -> dict[str, float]:
    """Tag -> value of a recording step, alike for the Logger and `LiveDiagnosis`.

    The step's signals and, on a step that moved the weights, its batch
    logs (`batch/<name>`) and the learning rate; batch values of a step
    that did not move would land on the previous step's point.
    """
    values = dict(record.scalars)
    if record.scalars and record.moved:
        values.update(_tags.from_keras_logs(record.logs, batch_level=True))
        rate = learning_rate(optimizer)
        if rate is not None:
            values[_tags.LEARNING_RATE] = rate
    return values


def epoch_values(epoch: int, logs, optimizer) -> dict[str, float]:
    """`tags.epoch_values` with the optimizer's learning rate as it is now.

    Example:

    >>> epoch_values(2, {"loss": 0.5, "val_loss": 0.6}, None)
    {'train/epoch': 2.0, 'train/loss': 0.5, 'val/loss': 0.6}
    """
    return _tags.epoch_values(epoch, logs, learning_rate(optimizer))


def run_config(model, params: dict | None = None, **settings) -> dict:
    """The configuration rows of the `config/hparams` table.

    Args:
        model: the compiled Keras model.
        params: Keras's callback `params` (`epochs`, `steps`). Defaults to `None`.
        **settings: more rows (the logger's schedule, the guard policy...), appended.

    Returns:
        An ordered dict: model, optimizer, learning_rate, loss, epochs,
        steps_per_epoch, parameters, the settings, TensorFlow and Keras versions.
    """
    optimizer = getattr(model, "optimizer", None)
    params = params or {}
    config = {
        "model": model.name,
        "optimizer": type(optimizer).__name__ if optimizer is not None else None,
        "learning_rate": learning_rate(optimizer),
        "loss": loss_name(getattr(model, "loss", None)),
        "epochs": params.get("epochs"),
        "steps_per_epoch": params.get("steps"),
        "parameters": int(model.count_params()) if model.built else None,
    }
    config.update(settings)
    config["tensorflow"] = tf.__version__
    config["keras"] = keras.__version__
    return config


def phase_rows(phases: list[dict]) -> dict[str, str]:
    """The `config/hparams` rows of a run's training phases (none for a run of one phase).

    Example:

    >>> phase_rows([{"phase": 1, "first_step": 1, "optimizer": "Adam", "learning_rate": 0.01,
    ...              "trainable_variables": 2, "trainable_parameters": 330}])
    {'phase 1': 'from step 1: Adam, learning rate 0.01, 2 trainable variables (330 parameters)'}
    """
    rows = {}
    for phase in phases:
        rate = phase.get("learning_rate")
        rate = f"learning rate {rate:.4g}, " if isinstance(rate, (int, float)) else ""
        rows[f"phase {phase.get('phase')}"] = (
            f"from step {phase.get('first_step')}: {phase.get('optimizer')}, {rate}"
            f"{phase.get('trainable_variables')} trainable variables ({phase.get('trainable_parameters')} parameters)")
    return rows


def model_description(model) -> str | None:
    """The JSON of `tfguard.lint.describe_model(model)`, or `None` if that is missing or fails.

    The description is best effort: any error leaves the run without it.
    """
    try:
        return json.dumps(describe_model(model), default=str, sort_keys=True)
    except Exception:  # a description is never worth a training run
        return None


def _host_array(value):
    leaves = tf.nest.flatten(value) if value is not None else []
    if len(leaves) != 1:
        return None
    leaf = leaves[0]
    return leaf.numpy() if isinstance(leaf, tf.Tensor) else leaf


def lint_json(model, x=None, y=None, extra=()) -> str:
    """The JSON list of `tfguard.lint.lint` findings (as dicts) for the model and one batch.

    Best effort like `model_description`: a check that fails gives `[]` (or
    the model-only findings), never an error.

    Args:
        model: the Keras model.
        x: one input batch (a single tensor or array; other structures are
            left out). Defaults to `None`.
        y: its labels. Defaults to `None`.
        extra: more findings to list (the input pipeline's). Defaults to `()`.

    Returns:
        A JSON text, e.g. `[{"id": "label_range", "severity": "error", ...}]`.
    """
    findings = []
    for kwargs in ({"x": _host_array(x), "y": _host_array(y)}, {}):
        try:
            findings = lint(model, **kwargs)
            break
        except Exception:  # e.g. a batch structure the checks do not read: model only
            continue
    return json.dumps(strict_json([f.to_dict() for f in [*findings, *extra]]))


def guard_event_line(event) -> str:
    """One markdown line for one firewall violation: step, stage, where, action, message.

    Example:

    >>> from tfguard._firewall import GuardEvent
    >>> guard_event_line(GuardEvent(12, "loss", "loss", "loss at step 12 has 1 NaN", {}, "skipped"))
    '- step 12, **loss**: loss (skipped). loss at step 12 has 1 NaN'
    """
    where = " ".join(str(event.where).split())
    message = " ".join(str(event.message).split())
    return f"- step {event.step}, **{event.stage}**: {where} ({event.action}). {message}"


def guard_event_json(event) -> str:
    """One firewall violation as the JSON the diagnosis reads back (`guard/records`).

    Example:

    >>> from tfguard._firewall import GuardEvent
    >>> e = GuardEvent(3, "data", "y", "y at batch 3 failed check 'labels': 2 of 8 ...", {"bad": 2},
    ...                "skipped", check="labels")
    >>> json.loads(guard_event_json(e))["check"]
    'labels'
    """
    return json.dumps(strict_json(event_record(event)))


__all__ = ["guard_event_json", "guard_event_line", "learning_rate", "lint_json", "loss_name", "model_description",
           "phase_rows", "run_config"]
