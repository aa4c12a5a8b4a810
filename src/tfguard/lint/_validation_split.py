"""`lint_validation_split`: classes that `fit(validation_split=...)` holds out and never trains on.

Keras takes the validation part of `validation_split` from the end of `x` and
`y` as given, before any shuffling (`shuffle=True` shuffles the training part
only). Data stored sorted by class then validate on classes the model never
sees: the training accuracy climbs while the validation accuracy stays at 0
(defects4ml 091, Stack Overflow question 56103207). The check reads the
in-memory labels once, before training, and reports the classes of the
validation part that the training part (almost) never holds: at least
`HELD_OUT_SHARE` of the class's examples are in the validation part.

A class counts only with at least `MIN_HELD_OUT_EXAMPLES` validation examples:
shuffled data put every one of a class's k examples in a 20 % split with
probability 0.2**k (3e-4 for 5), so a rare class that lands there by chance is
not read as sorted data; a sorted split rarely falls exactly on a class
boundary (one example of the last class left in training is still a class
the model cannot learn). Labels that are not class ids (regression targets,
soft or multi-hot rows) are not checked.

Example:

>>> import numpy as np
>>> y = np.repeat([0, 1, 2, 3, 4], 20)  # sorted by class
>>> (f,) = lint_validation_split(y, 0.2)
>>> f.id, f.evidence["held_out_classes"], f.evidence["validation_examples"]
('pipeline_order', [4], 20)
>>> lint_validation_split(np.random.default_rng(0).permutation(y), 0.2)
[]
"""

from __future__ import annotations

import math

import numpy as np

from tfguard._findings import Finding
from tfguard.lint._symptom_ids import PIPELINE_ORDER

MIN_HELD_OUT_EXAMPLES = 5
"""Validation examples a class needs to be reported (see the module docstring)."""
HELD_OUT_SHARE = 0.9
"""The share of a class's examples in the validation part from which training (almost) never holds it."""


def _class_ids(y) -> np.ndarray | None:
    """One class id per example: integer labels as they are, one-hot rows by their 1; else `None`."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim == 1:
        if not len(y) or not np.issubdtype(y.dtype, np.number):
            return None
        finite = np.isfinite(y) if np.issubdtype(y.dtype, np.floating) else np.ones(len(y), bool)
        if not finite.all() or np.any(np.mod(y, 1) != 0):
            return None
        return y.astype(np.int64)
    if y.ndim == 2 and np.issubdtype(y.dtype, np.number) and len(y):
        one_hot = np.all((y == 0) | (y == 1), axis=1) & (y.sum(axis=1) == 1)
        return np.argmax(y, axis=1) if one_hot.all() else None
    return None


def lint_validation_split(y, validation_split) -> list[Finding]:
    """The finding for classes `validation_split` holds out of `y` that training never holds.

    Args:
        y: the in-memory targets given to `fit` (an array of class ids or one-hot rows; a list
            or dict of arrays: the first).
        validation_split: `fit`'s argument, a float in (0, 1).

    Returns:
        One `pipeline_order` error (code `validation_classes_held_out`), or `[]`.
    """
    if isinstance(validation_split, bool) or not isinstance(validation_split, (int, float)) \
            or not 0 < validation_split < 1:
        return []
    if isinstance(y, dict):
        y = next(iter(y.values()), None)
    elif isinstance(y, (list, tuple)) and y and hasattr(y[0], "shape"):
        y = y[0]
    if y is None or not hasattr(y, "__len__"):
        return []
    ids = _class_ids(y)
    if ids is None:
        return []
    split_at = int(math.ceil(len(ids) * (1.0 - validation_split)))  # as Keras splits
    train, val = ids[:split_at], ids[split_at:]
    if not len(train) or not len(val):
        return []
    classes, counts = np.unique(val, return_counts=True)
    in_train = dict(zip(*np.unique(train, return_counts=True), strict=True))
    held_out = [int(c) for c, n in zip(classes, counts, strict=True)
                if n >= MIN_HELD_OUT_EXAMPLES and n >= HELD_OUT_SHARE * (n + in_train.get(c, 0))]
    if not held_out:
        return []
    share = float(np.isin(val, held_out).mean())
    trained = sum(int(in_train.get(c, 0)) for c in held_out)
    listed = ", ".join(map(str, held_out[:10])) + (", ..." if len(held_out) > 10 else "")
    return [Finding(
        id=PIPELINE_ORDER, severity="error",
        message=(f"validation_split={validation_split:g} holds out the last {len(val)} of "
                 f"{len(ids)} examples as given, before any shuffle: {100 * share:.0f}% of them "
                 f"are of class(es) {listed}, of which the {len(train)} training examples hold "
                 f"{'none' if not trained else f'only {trained}'}; the data reach fit() sorted "
                 "by class."),
        where="fit(validation_split=...)",
        evidence={"code": "validation_classes_held_out", "held_out_classes": held_out,
                  "held_out_share": share, "held_out_in_training": trained,
                  "validation_examples": int(len(val)), "training_examples": int(len(train))},
        suggestion=("Shuffle x and y together before fit (`p = np.random.permutation(len(x)); "
                    "x, y = x[p], y[p]`), or pass validation_data drawn at random."),
    )]


__all__ = ["HELD_OUT_SHARE", "MIN_HELD_OUT_EXAMPLES", "lint_validation_split"]
