"""Invariant of the loss: it reads the labels.

`labels_read(model, x, y, sample_weight)` computes the model's own loss
(`compute_loss`, the compiled loss or the user's override) twice on one
batch, with the true labels and with labels changed everywhere
(`batches.other_labels`), from one inference pass held fixed. A loss that
never reads `y` gives the same value and the same gradient with respect to
the predictions: `labels_ignored`.

`metrics_read` asks the same of each compiled metric (code `metric`).

Only for models that run Keras's own `train_step` (a custom step may not
call `compute_loss`: its loss is not known to be the one trained), and only
when the batch has labels.

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
>>> model.compile(loss="mse")
>>> rng = np.random.default_rng(0)
>>> labels_read(model, rng.normal(size=(4, 3)), rng.normal(size=(4, 2)))["ok"]
True
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tfguard._hooks import keras_compat
from tfguard._hooks.untouched import call_for_inference, untouched
from tfguard.invariants import _batches, _evidence
from tfguard.invariants._inference import RELATIVE_TOLERANCE, relative_change


def _loss(model, x, y, y_pred, sample_weight):
    with tf.GradientTape() as tape:
        tape.watch(y_pred)
        loss = keras_compat.compute_loss(model, x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                         training=True)
    gradients = tape.gradient(loss, y_pred)
    flat = [np.zeros(p.shape) if g is None else np.asarray(g)
            for p, g in zip(tf.nest.flatten(y_pred), tf.nest.flatten(gradients))]
    return float(np.asarray(loss)), flat


def _classes(y_pred) -> int | None:
    first = tf.nest.flatten(y_pred)[0]
    return int(first.shape[-1]) if first.shape.rank and first.shape[-1] else None


def _label_change(model, x, y, other, y_pred, sample_weight) -> tuple[float, float, float]:
    """`(loss, loss with the other labels, relative change of the loss or its gradient)` at `y_pred`."""
    loss, gradient = _loss(model, x, y, y_pred, sample_weight)
    loss_other, gradient_other = _loss(model, x, other, y_pred, sample_weight)
    change = max([relative_change(np.asarray(loss), np.asarray(loss_other))]
                 + [relative_change(a, b) for a, b in zip(gradient, gradient_other)])
    return loss, loss_other, change


def _probe(y_pred):
    """`evidence.probe_predictions` as tensors in `y_pred`'s structure."""
    return tf.nest.pack_sequence_as(
        y_pred, [tf.convert_to_tensor(p) for p in _evidence.probe_predictions(y_pred)])


def labels_read(model: keras.Model, x, y, sample_weight=None) -> dict:
    """`labels_ignored` record: other labels must change the loss or its gradient.

    Where they change neither at the model's own predictions, the loss is
    asked again at predictions that vary (`evidence.probe_predictions`): a
    sigmoid collapsed at 0.5 under binary cross-entropy scores `ln 2` for
    any label, yet the loss reads the labels. A batch without weight, or
    non-finite predictions or losses, decide nothing (`evidence.undecided`).

    Args:
        model: a compiled Keras model running Keras's own `train_step`.
        x: one batch of inputs (numpy structure).
        y: its labels.
        sample_weight: its sample weights. Defaults to `None`.

    Returns:
        The record; `ok=False` when neither the loss nor its gradient moved,
        at the model's predictions nor at the probe's; `ok=None` when the
        evidence cannot decide.
    """
    record = {"check": "labels_ignored", "ok": True, "where": None, "evidence": {}}
    if y is None or type(model).train_step is not keras.Model.train_step:
        record["evidence"]["skipped"] = "no labels" if y is None else "a custom train_step"
        return record
    if _evidence.weightless(sample_weight):
        return _evidence.undecided(record, "the batch's sample weights are all zero: the loss is 0 "
                                          "whatever the labels")
    with untouched(model):
        y_pred = tf.nest.map_structure(tf.convert_to_tensor, call_for_inference(model, x))
        if _evidence.not_finite(y_pred):
            return _evidence.undecided(record, "the model's predictions on the batch are not finite")
        other = _batches.other_label_structure(y, _classes(y_pred))
        loss, loss_other, change = _label_change(model, x, y, other, y_pred, sample_weight)
        record["evidence"].update(loss=loss, loss_other_labels=loss_other, relative_change=change)
        if not (np.isfinite(loss) and np.isfinite(loss_other)):
            return _evidence.undecided(record, "the loss is not finite on the batch")
        if change > RELATIVE_TOLERANCE:
            return record
        # the same loss for other labels: a loss that ignores them, or a point where it does not
        # depend on them (a sigmoid at exactly 0.5 under binary cross-entropy): ask elsewhere
        probe_loss, probe_other, probe_change = _label_change(model, x, y, other, _probe(y_pred),
                                                              sample_weight)
    record["evidence"].update(probe_relative_change=probe_change)
    if not (np.isfinite(probe_loss) and np.isfinite(probe_other)):
        return _evidence.undecided(record, "the loss does not depend on the labels at the model's "
                                          "predictions and is not finite at others")
    if probe_change > RELATIVE_TOLERANCE:
        record["evidence"]["label_blind_point"] = (
            f"at the model's predictions the loss is {loss:.6g} for any labels; at other "
            "predictions it reads them")
        return record
    record.update(ok=False, where=getattr(model, "name", None))
    record["evidence"]["loss_override"] = (type(model).compute_loss
                                           is not keras.Model.compute_loss)
    return record


def _label_like(y: np.ndarray, y_pred: np.ndarray, shift: int) -> np.ndarray:
    """Labels in `y`'s format that agree with the predictions (`shift=0`) or never do (`shift=1`).

    Class ids (integers, or integer-valued floats one rank below the
    predictions) become the predicted class (or the next one), one-hot rows
    the predicted class's row, labels in [0, 1] the rounded prediction (or
    its complement), other numbers the prediction itself (or moved by a
    ramp). Labels of shape `(n,)` for predictions of shape `(n, 1)` are read
    as a column.
    """
    y, y_pred = np.asarray(y), np.asarray(y_pred)
    classes = y_pred.shape[-1] if y_pred.ndim else 1
    ids = y.dtype.kind in "iub" or (y.ndim == y_pred.ndim - 1 and y.size and np.all(np.mod(y, 1) == 0))
    if ids and classes > 1 and y.size * classes == y_pred.size:
        top = (np.argmax(y_pred, axis=-1) + shift) % classes
        return top.reshape(y.shape).astype(y.dtype)
    if y.shape != y_pred.shape and y.size == y_pred.size:  # a label vector for a one-unit output
        return _label_like(y.reshape(y_pred.shape), y_pred, shift).reshape(y.shape)
    if y.shape == y_pred.shape and classes > 1 and np.allclose(y.sum(-1), 1.0):
        return np.eye(classes, dtype=y.dtype)[(np.argmax(y_pred, axis=-1) + shift) % classes]
    if y.size and np.all((y >= 0) & (y <= 1)) and y.shape == y_pred.shape:
        hard = np.round(np.clip(y_pred, 0, 1))
        return (np.abs(hard - shift)).astype(y.dtype)
    if y.shape == y_pred.shape:
        return _batches.other_labels(y_pred.astype(y.dtype)) if shift else y_pred.astype(y.dtype)
    raise ValueError(f"labels of shape {y.shape} for predictions of shape {y_pred.shape}")


def _label_blind(model, x, y, y_pred, sample_weight) -> tuple[dict, dict]:
    """The metrics' values with labels that agree with `y_pred` and with labels that never do."""
    def values(labels) -> dict:
        for metric in model.metrics:
            metric.reset_state()
        results = model.compute_metrics(x, labels, tf.convert_to_tensor(y_pred), sample_weight)
        found = {}
        for name, value in results.items():
            value = np.asarray(value)
            if name != "loss" and value.ndim == 0 and np.isfinite(value):
                found[name] = float(value)
        return found

    return values(_label_like(y, y_pred, 0)), values(_label_like(y, y_pred, 1))


def metrics_read(model: keras.Model, x, y, sample_weight=None) -> dict:
    """`labels_ignored` record (code `metric`): each compiled metric must see the labels.

    The compiled metrics (`model.compute_metrics`) are computed on one held
    inference pass twice: with labels that agree with the predictions and with
    labels that never do. A metric that reads the labels differs (accuracy 1
    against 0, an error of 0 against more); one that ignores them does not.
    A metric that gives the same value both times at the model's predictions
    is asked again at predictions that vary (`evidence.probe_predictions`):
    `FalsePositives` on a batch with no predicted positive is 0 for any
    labels, yet it reads them.

    Args:
        model: a compiled Keras model running Keras's own `train_step`.
        x: one batch of inputs (numpy structure).
        y: its labels (one array).
        sample_weight: its sample weights. Defaults to `None`.

    Returns:
        The record; `ok=False` names the first metric that ignores the labels
        at both; `ok=None` when the batch has no weight or the predictions
        are not finite.
    """
    record = {"check": "labels_ignored", "ok": True, "where": None,
              "evidence": {"code": "metric"}}
    if (y is None or type(model).train_step is not keras.Model.train_step
            or not isinstance(y, np.ndarray)):
        record["evidence"]["skipped"] = "no single label array, or a custom train_step"
        return record
    if _evidence.weightless(sample_weight):
        return _evidence.undecided(record, "the batch's sample weights are all zero")
    with untouched(model):
        y_pred = call_for_inference(model, x)
        if not hasattr(y_pred, "shape"):
            record["evidence"]["skipped"] = "several outputs"
            return record
        y_pred = np.asarray(y_pred)
        if _evidence.not_finite(y_pred):
            return _evidence.undecided(record, "the model's predictions on the batch are not finite")
        agree, differ = _label_blind(model, x, y, y_pred, sample_weight)
        ignoring = [name for name in agree if name in differ and agree[name] == differ[name]]
        if ignoring:  # the same value for labels that agree and labels that never do: ask elsewhere
            probe_agree, probe_differ = _label_blind(
                model, x, y, _evidence.probe_predictions(y_pred)[0], sample_weight)
            decided = [name for name in ignoring if name in probe_agree and name in probe_differ]
            blind_point = [name for name in decided if probe_agree[name] != probe_differ[name]]
            ignoring = [name for name in decided if probe_agree[name] == probe_differ[name]]
            if blind_point:
                record["evidence"]["label_blind_point"] = blind_point
    record["evidence"].update(metrics=sorted(agree), agreeing_labels=agree, other_labels=differ)
    if ignoring:
        record.update(ok=False, where=ignoring[0])
        record["evidence"]["ignoring"] = ignoring
    return record


__all__ = ["labels_read", "metrics_read"]
