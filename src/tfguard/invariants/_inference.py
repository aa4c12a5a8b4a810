"""Invariants of the inference path: deterministic, batch-independent, not collapsed.

Three checks on the model's own `call` in inference mode (`training=False`,
what `predict` and `evaluate` run), each from a handful of eager forward
passes on one batch:

- `training_mode_leak`: two identical passes must agree. Dropout or noise
  that still fires (a hard-coded `training=True`) makes them disagree; a
  BatchNormalization layer that normalizes with the batch's statistics
  shows as the first layer whose rows depend on the rest of the batch.
- `batch_dependence`: the first `KEEP_ROWS` examples must give the same
  outputs alone, and among other neighbours, as in the batch. The record
  names the first layer whose output breaks it (or the model's own `call`,
  after the last layer that kept it).
- `collapsed_output`: the model's outputs and the outputs of its nested
  models (embeddings) must vary across examples that differ: a spread
  below `COLLAPSE_SPREAD` of the magnitude is the same answer for every input.

Each check returns a record: `{"check", "ok", "where", "evidence"}`.

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="d")])
>>> x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
>>> [r["ok"] for r in (determinism(model, x), batch_independence(model, x), collapse(model, x))]
[True, True, True]
"""

from __future__ import annotations

import keras
import numpy as np

from tfguard._hooks.untouched import untouched
from tfguard.invariants import _batches, _evidence
from tfguard.invariants._probe import Seen, forward

KEEP_ROWS = 4
"""The examples whose outputs are compared alone, among other neighbours and in the batch."""

RELATIVE_TOLERANCE = 1e-4
"""Largest change of an output, relative to its largest magnitude, that is float round-off
(a different batch size can pick a different matmul kernel). Widened to 8 ulps for half precision."""

COLLAPSE_SPREAD = 1e-4
"""A spread across examples (mean per-feature standard deviation) below this fraction of the
output's mean magnitude is the same output for every input."""

NORMALIZING_LAYERS = ("BatchNormalization", "SyncBatchNormalization")
"""Layers that mix examples in training mode only: mixing at inference is a training-mode leak."""

NOISE_LAYERS = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
                "GaussianNoise", "GaussianDropout", "AlphaDropout")
"""Layers that are random in training mode only: randomness at inference is a training-mode leak."""


def _tolerance(array: np.ndarray) -> float:
    if array.dtype.kind == "f" and np.finfo(array.dtype).eps > 1e-6:
        return max(RELATIVE_TOLERANCE, 8 * float(np.finfo(array.dtype).eps))
    return RELATIVE_TOLERANCE


def relative_change(a: np.ndarray, b: np.ndarray) -> float:
    """`max |a - b|` over the largest magnitude of either (0 when both are all zeros).

    Example:

    >>> relative_change(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
    0.2
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    scale = max(float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0)))
    diff = float(np.max(np.abs(a - b), initial=0.0))
    return round(diff / scale, 12) if scale > 0 else 0.0


def _worst(first: list, second: list, rows: int | None = None, others: int | None = None):
    """The largest relative change between two lists of arrays (rows `[:rows]` of the first)."""
    worst, tolerance = 0.0, RELATIVE_TOLERANCE
    for a, b in zip(first, second):
        if a.dtype.kind not in "fc" or a.ndim == 0:
            continue
        if rows is not None:
            if a.shape[0] != others or b.shape[0] != rows:
                continue
            a = a[:rows]
        change = relative_change(a, b)
        if change > worst:
            worst, tolerance = change, _tolerance(a)
    return worst, tolerance


def _first_layer(first: Seen, second: Seen, rows: int | None = None, others: int | None = None):
    """The first layer call whose outputs differ beyond tolerance: `(LayerOutput, change)` or `(None, 0)`."""
    if [r.path for r in first.layers] != [r.path for r in second.layers]:
        return None, 0.0
    for a, b in zip(first.layers, second.layers):
        change, tolerance = _worst(a.arrays, b.arrays, rows, others)
        if change > tolerance:
            return a, change
    return None, 0.0


def _model_name(model) -> str:
    return getattr(model, "name", None) or type(model).__name__


def determinism(model: keras.Model, x) -> dict:
    """`training_mode_leak` record: two identical inference passes on `x` must agree.

    Args:
        model: a Keras model with a `call`.
        x: one batch of inputs (numpy structure).

    Returns:
        The record; `ok=False` names the first layer whose outputs disagree.
    """
    with untouched(model):
        first, second = _outputs(model, x), _outputs(model, x)
    change, tolerance = _worst(first.outputs, second.outputs)
    record = {"check": "training_mode_leak", "ok": change <= tolerance, "where": None,
              "evidence": {"code": "random_at_inference", "relative_change": change}}
    cannot = _cannot_compare(first.outputs + second.outputs, moved=not record["ok"])
    if cannot:
        return _evidence.undecided(record, cannot)
    if not record["ok"]:
        with untouched(model):  # two more passes, every layer recorded: which layer differs
            first, second = forward(model, x, reads=False), forward(model, x, reads=False)
        layer, _ = _first_layer(first, second)
        record["where"] = layer.path if layer is not None else _model_name(model)
        record["evidence"]["layer_class"] = layer.kind if layer is not None else None
        record["evidence"]["known_training_layer"] = bool(layer is not None
                                                          and layer.kind in NOISE_LAYERS)
    return record


def batch_independence(model: keras.Model, x) -> dict:
    """`batch_dependence` record: the first rows' outputs must not depend on the other rows.

    The first `KEEP_ROWS` examples go through alone, and with every other
    row replaced, and are compared with the same examples in the batch. A
    BatchNormalization layer that breaks it is a training-mode leak: the
    record's `check` is then `training_mode_leak` (code `batch_statistics`).

    Args:
        model: a Keras model with a `call`.
        x: one batch of inputs (numpy structure) of at least 2 rows.

    Returns:
        The record; `ok=False` names the first layer whose output breaks it.
    """
    n = _batches.rows(x) or 0
    keep = min(KEEP_ROWS, max(1, n // 2))
    record = {"check": "batch_dependence", "ok": True, "where": None,
              "evidence": {"examples": keep, "batch": n}}
    if n < 2:
        record["evidence"]["skipped"] = "a batch of one example"
        return record
    inputs = {"alone": _batches.take(x, keep), "other_neighbours": _batches.replace_rest(x, keep)}
    with untouched(model):
        full = _outputs(model, x)
        variants = {how: _outputs(model, batch) for how, batch in inputs.items()}
    if _evidence.not_finite(full.outputs + [a for seen in variants.values() for a in seen.outputs]):
        return _evidence.undecided(record, "the model's outputs on the batch are not finite")
    for how, seen in variants.items():
        change, tolerance = _worst(full.outputs, _rows_of(seen, keep).outputs, keep, n)
        if change <= tolerance:
            continue
        with untouched(model):  # the two passes again, every layer recorded: which layer breaks it
            full = forward(model, x, reads=False)
            cut = _rows_of(forward(model, inputs[how], reads=False), keep)
        layer, _ = _first_layer(full, cut, keep, n)
        record.update(ok=False, where=layer.path if layer is not None else _model_name(model))
        record["evidence"].update(relative_change=change, compared=how,
                                  layer_class=layer.kind if layer is not None else None,
                                  after_layer=_last_clean(full, layer))
        if layer is not None and layer.kind in NORMALIZING_LAYERS:
            record["check"] = "training_mode_leak"
            record["evidence"]["code"] = "batch_statistics"
        return record
    if _evidence.constant_rows(full.outputs, RELATIVE_TOLERANCE):
        return _evidence.undecided(record, "the model's output is the same for every example: "
                                          "rows mixed across the batch would not show")
    return record


def _cannot_compare(outputs: list, moved: bool) -> str | None:
    """Why two passes' outputs cannot show a difference: not finite, or the same for every
    example (only when no difference was seen: a difference is evidence whatever the output)."""
    if _evidence.not_finite(outputs):
        return "the model's outputs on the batch are not finite"
    if not moved and _evidence.constant_rows(outputs[:1], RELATIVE_TOLERANCE):
        return "the model's output is the same for every example: randomness at inference would not show"
    return None


def _outputs(model: keras.Model, x) -> Seen:
    """One inference pass that records the model's outputs only (nothing the size of its activations)."""
    return forward(model, x, layers=False, reads=False)


def _rows_of(seen: Seen, keep: int) -> Seen:
    """The same pass, every output cut to its first `keep` rows."""
    cut = [type(r)(r.path, r.kind, r.is_model, [a[:keep] if a.ndim else a for a in r.arrays])
           for r in seen.layers]
    return Seen(outputs=[a[:keep] if a.ndim else a for a in seen.outputs], layers=cut, read=seen.read)


def _last_clean(full: Seen, culprit) -> str | None:
    """The last layer call that completed before the culprit (or before the model's own output)."""
    paths = [r.path for r in full.layers]
    if culprit is None:
        return paths[-1] if paths else None
    index = next(i for i, r in enumerate(full.layers) if r is culprit)
    return paths[index - 1] if index else None


def spread(array: np.ndarray) -> tuple[float, float]:
    """`(spread, magnitude)`: the mean per-feature std across rows, and the mean |value|.

    Example:

    >>> spread(np.array([[1.0, 2.0], [1.0, 2.0]]))
    (0.0, 1.5)
    """
    a = np.asarray(array, np.float64).reshape(len(array), -1)
    return float(np.mean(np.std(a, axis=0))), float(np.mean(np.abs(a)))


def collapse(model: keras.Model, x, seen: Seen | None = None, y=None) -> dict:
    """`collapsed_output` record: outputs and embeddings must vary across differing inputs.

    A batch whose labels are all the same (one class, one target) tells
    nothing: the same output for every example is then right. Non-finite
    outputs tell nothing either. Both records are undecided
    (`evidence.undecided`).

    Args:
        model: a Keras model with a `call`.
        x: one batch of inputs (numpy structure).
        seen: a forward pass of `x` already made. Defaults to `None` (one is made).
        y: the batch's labels, when known. Defaults to `None`.

    Returns:
        The record; `ok=False` names the first (innermost) collapsed output.
    """
    record = {"check": "collapsed_output", "ok": True, "where": None, "evidence": {}}
    n = _batches.rows(x) or 0
    if n < 2 or not _batches.rows_differ(x):
        record["evidence"]["skipped"] = "the batch's inputs do not differ"
        return record
    if y is not None and not _batches.rows_differ(y):
        return _evidence.undecided(record, "the batch's labels are all the same: one output for "
                                          "every example is right on it")
    if seen is None:
        with untouched(model):
            seen = forward(model, x, models_only=True)
    if _evidence.not_finite(seen.outputs):
        return _evidence.undecided(record, "the model's outputs on the batch are not finite")
    candidates = [(r.path, r.arrays) for r in seen.layers if r.is_model]
    candidates.append((_model_name(model), seen.outputs))
    for where, arrays in candidates:
        for array in arrays:
            if array.dtype.kind != "f" or array.ndim == 0 or array.shape[0] != n:
                continue
            spread_, magnitude = spread(array)
            if spread_ <= COLLAPSE_SPREAD * magnitude:
                record.update(ok=False, where=where)
                record["evidence"].update(spread=spread_, magnitude=magnitude, examples=n,
                                          features=int(array[0].size))
                return record
    return record


__all__ = ["COLLAPSE_SPREAD", "KEEP_ROWS", "NOISE_LAYERS", "NORMALIZING_LAYERS",
           "RELATIVE_TOLERANCE", "batch_independence", "collapse", "determinism",
           "relative_change", "spread"]
