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

from tfguard.hooks import keras_compat
from tfguard.hooks.untouched import call, untouched
from tfguard.invariants import batches
from tfguard.invariants.inference import RELATIVE_TOLERANCE, relative_change


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


def labels_read(model: keras.Model, x, y, sample_weight=None) -> dict:
    """`labels_ignored` record: other labels must change the loss or its gradient.

    Args:
        model: a compiled Keras model running Keras's own `train_step`.
        x: one batch of inputs (numpy structure).
        y: its labels.
        sample_weight: its sample weights. Defaults to `None`.

    Returns:
        The record; `ok=False` when neither the loss nor its gradient moved.
    """
    record = {"check": "labels_ignored", "ok": True, "where": None, "evidence": {}}
    if y is None or type(model).train_step is not keras.Model.train_step:
        record["evidence"]["skipped"] = "no labels" if y is None else "a custom train_step"
        return record
    kwargs = {"training": False} if keras_compat.call_has_training_arg(model) else {}
    with untouched(model):
        y_pred = tf.nest.map_structure(tf.convert_to_tensor, call(model, x, **kwargs))
        other = batches.other_label_structure(y, _classes(y_pred))
        loss, gradient = _loss(model, x, y, y_pred, sample_weight)
        loss_other, gradient_other = _loss(model, x, other, y_pred, sample_weight)
    change = max([relative_change(np.asarray(loss), np.asarray(loss_other))]
                 + [relative_change(a, b) for a, b in zip(gradient, gradient_other)])
    record["evidence"].update(loss=loss, loss_other_labels=loss_other, relative_change=change)
    if change <= RELATIVE_TOLERANCE:
        record.update(ok=False, where=getattr(model, "name", None))
        record["evidence"]["loss_override"] = (type(model).compute_loss
                                               is not keras.Model.compute_loss)
        record["evidence"]["loss"] = loss
    return record


def _label_like(y: np.ndarray, y_pred: np.ndarray, shift: int) -> np.ndarray:
    """Labels in `y`'s format that agree with the predictions (`shift=0`) or never do (`shift=1`).

    Class ids become the predicted class (or the next one), one-hot rows the
    predicted class's row, labels in [0, 1] the rounded prediction (or its
    complement), other numbers the prediction itself (or moved by a ramp).
    """
    y, y_pred = np.asarray(y), np.asarray(y_pred)
    classes = y_pred.shape[-1] if y_pred.ndim else 1
    if y.dtype.kind in "iub" and classes > 1:
        top = (np.argmax(y_pred, axis=-1) + shift) % classes
        return top.reshape(y.shape).astype(y.dtype)
    if y.shape == y_pred.shape and classes > 1 and np.allclose(y.sum(-1), 1.0):
        return np.eye(classes, dtype=y.dtype)[(np.argmax(y_pred, axis=-1) + shift) % classes]
    if y.size and np.all((y >= 0) & (y <= 1)) and y.shape == y_pred.shape:
        hard = np.round(np.clip(y_pred, 0, 1))
        return (np.abs(hard - shift)).astype(y.dtype)
    if y.shape == y_pred.shape:
        return batches.other_labels(y_pred.astype(y.dtype)) if shift else y_pred.astype(y.dtype)
    raise ValueError(f"labels of shape {y.shape} for predictions of shape {y_pred.shape}")


def metrics_read(model: keras.Model, x, y, sample_weight=None) -> dict:
    """`labels_ignored` record (code `metric`): each compiled metric must see the labels.

    The compiled metrics (`model.compute_metrics`) are computed on one held
    inference pass twice: with labels that agree with the predictions and with
    labels that never do. A metric that reads the labels differs (accuracy 1
    against 0, an error of 0 against more); one that ignores them does not.

    Args:
        model: a compiled Keras model running Keras's own `train_step`.
        x: one batch of inputs (numpy structure).
        y: its labels (one array).
        sample_weight: its sample weights. Defaults to `None`.

    Returns:
        The record; `ok=False` names the first metric that ignores the labels.
    """
    record = {"check": "labels_ignored", "ok": True, "where": None,
              "evidence": {"code": "metric"}}
    if (y is None or type(model).train_step is not keras.Model.train_step
            or not isinstance(y, np.ndarray)):
        record["evidence"]["skipped"] = "no single label array, or a custom train_step"
        return record
    kwargs = {"training": False} if keras_compat.call_has_training_arg(model) else {}
    with untouched(model):
        y_pred = call(model, x, **kwargs)
        if not hasattr(y_pred, "shape"):
            record["evidence"]["skipped"] = "several outputs"
            return record

        def values(labels) -> dict:
            for metric in model.metrics:
                metric.reset_state()
            results = model.compute_metrics(x, labels, y_pred, sample_weight)
            found = {}
            for name, value in results.items():
                value = np.asarray(value)
                if name != "loss" and value.ndim == 0 and np.isfinite(value):
                    found[name] = float(value)
            return found

        agree = values(_label_like(y, np.asarray(y_pred), 0))
        differ = values(_label_like(y, np.asarray(y_pred), 1))
    ignoring = [name for name in agree if name in differ and agree[name] == differ[name]]
    record["evidence"].update(metrics=sorted(agree), agreeing_labels=agree, other_labels=differ)
    if ignoring:
        record.update(ok=False, where=ignoring[0])
        record["evidence"]["ignoring"] = ignoring
    return record


__all__ = ["labels_read", "metrics_read"]
