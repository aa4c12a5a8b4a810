"""Invariant of the loss: it does not reward predictions outside the range of the labels.

A loss scores predictions of the labels' kind: a cross-entropy expects
probabilities in [0, 1] for labels in {0, 1}, a regression loss numbers
of the targets' scale. Written by hand for probabilities (`-mean(y *
log(clip(p)) + (1 - y) * log(clip(1 - p)))`) and fed a linear output, a
loss can fall below anything a prediction inside that range could score:
`1 - p` above 1 makes the second term positive, the model learns to push
its output out of range, and the training loss goes negative while
accuracy stays at chance.

`domain_read(model, x, y, sample_weight)` asks the model's own loss
(`compute_loss`, on a held inference pass) the question directly, on one
batch: what is the loss at the model's predictions, and what is the least
it scores at predictions inside the labels' range `[min(y), max(y)]`,
namely the labels themselves (a perfect prediction), a few constant
predictions across the range, and the model's own predictions clipped into
the range? A loss that is lower at the model's predictions than at every
one of these by a clear margin (`MARGIN` of the loss's own scale on the
batch), and keeps falling as the predictions are pushed further out
(`FURTHER`), rewards outputs outside its domain: `ok=False`.

What keeps the test true of losses nobody here wrote: every loss whose
minimum over valid predictions is the label itself (cross-entropies,
squared and absolute errors, Huber, Poisson, KL, hinge on labels in
{-1, 1}, cosine similarity at -1) has that minimum among the probes, so
no prediction, in range or not, scores below it; a loss negative by
design (cosine similarity) is negative at the labels too. A loss on
scores (a cross-entropy `from_logits`, a hinge) is lower outside the
labels' range than inside it, but bounded below: pushed 10x and 100x
further out its value levels off, while a loss written for values inside
the range (a clipped `log(1 - p)` at `p` far below 0) keeps falling. A loss whose
predictions are not of the labels' kind (sparse class ids for a K-unit
output, a distance scored against a same/different flag) has labels of
another shape, or a minimum among the constant probes; labels that do
not span a range (all the same) and non-finite predictions or losses
decide nothing (`evidence.undecided`).

The check runs at each epoch end until it fails, so it stops as soon as the
answer is known: predictions all inside the range cost one inference pass,
a loss no lower than at the labels (any loss minimized at its label) two
loss evaluations more.

Only for models that run Keras's own `train_step` (its loss is the one
trained) and one output whose labels have its shape.

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
>>> model.compile(loss="mse")
>>> rng = np.random.default_rng(0)
>>> domain_read(model, rng.normal(size=(8, 3)), rng.normal(size=(8, 1)))["ok"]
True
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tfguard._hooks import keras_compat
from tfguard._hooks.untouched import call_for_inference, untouched
from tfguard.invariants import _evidence

MARGIN = 0.1
"""How far below the best in-range probe the loss at the model's predictions must be, as a share of
the loss's scale on the batch (the loss at the middle of the range minus the best probe's)."""

FURTHER = (10.0, 100.0)
"""How many times further outside the range the out-of-range part of the predictions is pushed to
see whether the loss levels off (a loss on logits or margins) or keeps falling (one written for
values inside the range)."""

LABELS = "the labels themselves"
"""The first probe: a perfect prediction, the least any loss minimized at its label scores."""

CONSTANTS = 9
"""Constant predictions tried across the labels' range, ends included."""


def _loss(model, x, y, y_pred, sample_weight) -> float:
    loss = keras_compat.compute_loss(model, x=x, y=y, y_pred=tf.convert_to_tensor(y_pred),
                                     sample_weight=sample_weight, training=False)
    return float(np.asarray(loss))


def _probes(y: np.ndarray, y_pred: np.ndarray, low: float, high: float) -> dict[str, np.ndarray]:
    """Predictions inside `[low, high]`, by name: the labels, the model's clipped, constants."""
    found = {LABELS: y.astype(y_pred.dtype).reshape(y_pred.shape),
             f"the model's predictions clipped into [{low:.3g}, {high:.3g}]": np.clip(y_pred, low, high)}
    for value in np.linspace(low, high, CONSTANTS):
        found[f"a constant {value:.3g}"] = np.full(y_pred.shape, value, y_pred.dtype)
    return found


def domain_read(model: keras.Model, x, y, sample_weight=None) -> dict:
    """`loss_domain` record: the loss at the model's predictions is no lower than inside the labels' range.

    Args:
        model: a compiled Keras model running Keras's own `train_step`.
        x: one batch of inputs (numpy structure).
        y: its labels (one array).
        sample_weight: its sample weights. Defaults to `None`.

    Returns:
        The record; `ok=False` when the loss at the model's predictions is
        below the best in-range probe by more than `MARGIN` of the loss's
        scale and the predictions leave the range (`where`: the model);
        `ok=None` when the evidence cannot decide.
    """
    record = {"check": "loss_domain", "ok": True, "where": None, "evidence": {}}
    if (not isinstance(y, np.ndarray) or y.dtype.kind not in "fiub"
            or type(model).train_step is not keras.Model.train_step):
        record["evidence"]["skipped"] = "no single numeric label array, or a custom train_step"
        return record
    if _evidence.weightless(sample_weight):
        return _evidence.undecided(record, "the batch's sample weights are all zero")
    with untouched(model):
        y_pred = call_for_inference(model, x)
        if not hasattr(y_pred, "shape"):
            record["evidence"]["skipped"] = "several outputs"
            return record
        y_pred = np.asarray(y_pred)
        if y_pred.dtype.kind != "f" or y.size != y_pred.size or y.shape[0] != y_pred.shape[0]:
            record["evidence"]["skipped"] = (f"labels of shape {y.shape} are not predictions of "
                                             f"shape {y_pred.shape}")
            return record
        if _evidence.not_finite(y_pred) or not np.all(np.isfinite(y)):
            return _evidence.undecided(record, "the model's predictions or the labels are not finite")
        low, high = float(y.min()), float(y.max())
        if high <= low:
            return _evidence.undecided(record, "the batch's labels are all the same: they span no range")
        outside = float(np.mean((y_pred < low) | (y_pred > high)))
        record["evidence"].update(label_min=low, label_max=high, outside_fraction=outside,
                                  prediction_min=float(y_pred.min()), prediction_max=float(y_pred.max()))
        if outside == 0:
            return record  # predictions inside the range score what the loss gives them there
        at_model = _loss(model, x, y, y_pred, sample_weight)
        probe = _probes(y, y_pred, low, high)
        at_labels = _loss(model, x, y, probe.pop(LABELS), sample_weight)
        record["evidence"].update(loss=at_model, loss_at_labels=at_labels)
        if not np.isfinite(at_model):
            return _evidence.undecided(record, "the loss is not finite at the model's predictions")
        if np.isfinite(at_labels) and at_model >= at_labels:
            return record  # no lower than a perfect prediction: nothing in range scores less
        probes = {LABELS: at_labels, **{name: _loss(model, x, y, p, sample_weight)
                                        for name, p in probe.items()}}
        middle = _loss(model, x, y, np.full(y_pred.shape, (low + high) / 2, y_pred.dtype), sample_weight)
    finite = {name: value for name, value in probes.items() if np.isfinite(value)}
    if not (np.isfinite(middle) and finite):
        return _evidence.undecided(record, "the loss is not finite on the batch")
    best_name = min(finite, key=finite.get)
    best = finite[best_name]
    record["evidence"].update(best_in_range=best, best_probe=best_name)
    scale = abs(middle - best)
    if scale <= 0 or at_model >= best - MARGIN * scale:
        return record
    # a loss on scores (logits, a hinge's margins) is also lowest outside the labels' range, but
    # it levels off there; one written for values inside the range keeps falling without bound
    clipped = np.clip(y_pred, low, high)
    with untouched(model):
        further = [_loss(model, x, y, clipped + factor * (y_pred - clipped), sample_weight)
                   for factor in FURTHER]
    record["evidence"].update(loss_at_middle=middle, loss_further_out=further[-1])
    if not (np.isfinite(further).all() and further[-1] < further[0] - MARGIN * scale):
        record["evidence"]["levels_off"] = (
            f"pushed {FURTHER[0]:g}x and {FURTHER[-1]:g}x further out, the predictions score "
            f"{further[0]:.4g} and {further[-1]:.4g}: a loss on scores, bounded below")
        return record
    record.update(ok=False, where=getattr(model, "name", None))
    return record


__all__ = ["CONSTANTS", "FURTHER", "LABELS", "MARGIN", "domain_read"]
