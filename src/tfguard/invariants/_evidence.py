"""When the evidence of an invariant check can decide, and what to ask when it cannot.

Each check compares what the model's own functions give under two
conditions (labels changed, rows alone or in their batch, a variable
perturbed). A comparison that finds no difference proves something only
where a difference could have shown. It cannot where:

- the predictions or the loss are not finite (NaN compares as nothing);
- the batch carries no weight (all-zero sample weights: every loss is 0);
- the predictions sit where the loss or metric does not depend on the label
  (a sigmoid at exactly 0.5 under binary cross-entropy scores `ln 2` for
  label 0 and label 1; `FalsePositives` on a batch with no predicted
  positive is 0 for any labels);
- the model's output does not move (the same output for every example).

`undecided(record, reason)` marks such a record: `ok` is `None` and
`evidence["undecided"]` says why; the diagnosis rules make no finding from
it. Before a check calls the loss or a metric label-blind, it asks again at
`probe_predictions`: predictions that vary across examples, inside the
output's range, away from any point where the label does not count.

Example:

>>> import numpy as np
>>> collapsed = np.full((4, 1), 0.5, "float32")
>>> probe = probe_predictions([collapsed])[0]
>>> bool(np.all((probe > 0) & (probe < 1))), bool(np.ptp(probe) > 0.1)
(True, True)
>>> undecided({"check": "labels_ignored", "ok": True, "evidence": {}}, "why")["ok"] is None
True
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

PROBE_SEED = 0
"""Seed of the probe predictions: the same program gets the same verdict run after run."""


def undecided(record: dict, reason: str) -> dict:
    """`record` marked as undecided: `ok=None`, `where=None`, `evidence["undecided"] = reason`."""
    record.update(ok=None, where=None)
    record.setdefault("evidence", {})["undecided"] = reason
    return record


def not_finite(arrays) -> bool:
    """Whether any floating array among `arrays` (a structure) holds a NaN or an Inf."""
    for leaf in tf.nest.flatten(arrays):
        a = np.asarray(leaf)
        if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
            return True
    return False


def constant_rows(arrays, tolerance: float) -> bool:
    """Whether every floating output in `arrays` is the same for each row (up to `tolerance`
    of its magnitude): a model whose output does not move with its input."""
    seen = False
    for leaf in tf.nest.flatten(arrays):
        a = np.asarray(leaf, np.float64) if np.asarray(leaf).dtype.kind == "f" else None
        if a is None or a.ndim == 0 or len(a) < 2:
            continue
        seen = True
        flat = a.reshape(len(a), -1)
        scale = float(np.max(np.abs(flat), initial=0.0))
        if float(np.max(np.abs(flat - flat[:1]), initial=0.0)) > tolerance * max(scale, 1e-30):
            return False
    return seen


def weightless(sample_weight) -> bool:
    """Whether the batch's sample weights are all zero (every loss is 0 whatever the labels)."""
    if sample_weight is None:
        return False
    leaves = [np.asarray(w) for w in tf.nest.flatten(sample_weight) if w is not None]
    return bool(leaves) and all(w.size and not np.any(w) for w in leaves)


def usable_rows(x, y, sample_weight) -> np.ndarray | None:
    """The indices of the rows whose inputs and labels are finite and whose weight is not zero.

    A batch the firewall skipped for a NaN row, or whose first rows carry no
    weight, still has rows a check can read; `None` when the structure has
    no rows to index.

    Example:

    >>> x = np.array([[1.0], [np.nan], [2.0]]); w = np.array([1.0, 1.0, 0.0])
    >>> usable_rows(x, None, w).tolist()
    [0]
    """
    leaves = [np.asarray(a) for part in (x, y) for a in tf.nest.flatten(part) if a is not None]
    if not leaves or np.asarray(leaves[0]).ndim == 0:
        return None
    n = len(leaves[0])
    keep = np.ones(n, bool)
    for a in leaves:
        if a.ndim >= 1 and len(a) == n and a.dtype.kind in "fc":
            keep &= np.all(np.isfinite(a.reshape(n, -1)), axis=1)
    for w in tf.nest.flatten(sample_weight) if sample_weight is not None else []:
        w = np.asarray(w)
        if w.ndim >= 1 and len(w) == n:
            keep &= np.any(w.reshape(n, -1) != 0, axis=1)
    return np.flatnonzero(keep)


def probe_predictions(y_pred, seed: int = PROBE_SEED) -> list:
    """Predictions of the same shapes that vary across examples, in each output's range.

    Outputs within [0, 1] become values drawn in [0.1, 0.9] (rows that sum
    to 1 stay distributions: a softmax's); others become the predictions
    moved by noise of their own scale (at least 1). Integer outputs are
    kept. The draw is seeded (`PROBE_SEED`).

    Args:
        y_pred: the predictions (a structure of arrays).
        seed: the generator's seed. Defaults to `PROBE_SEED`.

    Returns:
        A flat list of float32 arrays, in `tf.nest.flatten` order.
    """
    rng = np.random.default_rng(seed)
    found = []
    for leaf in tf.nest.flatten(y_pred):
        a = np.asarray(leaf)
        if a.dtype.kind != "f" or a.ndim == 0:
            found.append(a)
            continue
        finite = a[np.isfinite(a)]
        if finite.size and finite.min() >= 0 and finite.max() <= 1:
            probe = rng.uniform(0.1, 0.9, a.shape)
            if a.ndim >= 2 and a.shape[-1] > 1 and np.allclose(np.nan_to_num(a).sum(-1), 1.0, atol=1e-3):
                probe = probe / probe.sum(-1, keepdims=True)
        else:
            scale = max(float(np.std(finite)) if finite.size else 0.0,
                        float(np.mean(np.abs(finite))) if finite.size else 0.0, 1.0)
            probe = np.nan_to_num(a) + scale * rng.standard_normal(a.shape)
        found.append(probe.astype(a.dtype))
    return found


__all__ = ["PROBE_SEED", "constant_rows", "not_finite", "probe_predictions", "undecided",
           "usable_rows", "weightless"]
