"""`lint_labels`: label values against the output units and the loss.

Label mistakes either crash `fit()` with a shape error far from the cause, or
(worse) train silently on garbage: a class id of 10 for a 10-unit softmax
gives NaN on a GPU, class ids 0..9 fed to binary crossentropy are clipped to 1.

| code | severity | what |
|---|---|---|
| `class_id_out_of_range` | error | a sparse label >= the number of output units |
| `negative_class_id` | error | a sparse label < 0 (other than the loss's `ignore_class`) |
| `non_integer_class_ids` | error | a sparse loss given fractional labels |
| `one_hot_to_sparse_loss` | error | one-hot rows given to a sparse loss |
| `class_ids_to_categorical_loss` | error | integer class ids given to categorical CE |
| `label_width_mismatch` | error | label width differs from the output units |
| `labels_outside_unit_interval` | error | binary/categorical CE labels outside [0, 1] |
| `multi_hot_to_categorical_loss` | warning | rows with several 1s given to categorical CE |
| `labels_not_distribution` | warning | categorical CE rows that do not sum to 1 |
| `nonfinite_labels` | error | NaN or Inf among the labels (`id="nonfinite"`) |

All other findings have `id="label_range"`. Losses tfguard does not know, and
regression losses, are not checked.

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
>>> model.compile(loss="sparse_categorical_crossentropy")
>>> [f.code for f in lint_labels(np.array([0, 1, 3]), model)]
['class_id_out_of_range']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfguard._errors import ContractError
from tfguard._findings import Finding
from tfguard.lint._heads import OutputHead, output_heads
from tfguard.lint._losses import LossInfo, losses_per_output
from tfguard.lint._symptom_ids import LABEL_RANGE, NONFINITE

#: Tolerance on the row sums of categorical labels.
ROW_SUM_TOLERANCE = 1e-3

_MAX_EXAMPLES = 5


def to_numpy(value: Any, what: str) -> np.ndarray:
    """Converts an array-like (numpy, tf.Tensor, list) to a numpy array.

    Args:
        value: the array-like.
        what: its name, for the error message.

    Returns:
        The numpy array.

    Raises:
        TypeError: if `value` cannot be read as a rectangular array.
    """
    if hasattr(value, "numpy") and callable(value.numpy):
        value = value.numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as err:
        raise ContractError(
            f"Received an invalid value for `{what}`, expected a rectangular array-like "
            f"(numpy array, tf.Tensor, list). Received: {type(value).__name__} ({err})"
        ) from None
    if array.dtype == object:
        raise ContractError(
            f"Received an invalid value for `{what}`, expected a rectangular numeric array. "
            f"Received: an array of Python objects of shape {array.shape}"
        )
    return array


def _examples(values: np.ndarray) -> list:
    return np.unique(values)[:_MAX_EXAMPLES].tolist()


def _resolved_kind(y: np.ndarray, head: OutputHead, loss: LossInfo) -> str:
    """The kind Keras would use; resolves the string `"crossentropy"` like `compile`."""
    if loss.kind != "auto_crossentropy":
        return loss.kind
    if head.units == 1:
        return "binary"
    rank = head.rank or 2
    if y.ndim < rank or (y.ndim and y.shape[-1] == 1):
        return "sparse_categorical"
    return "categorical"


def _is_integer_valued(y: np.ndarray) -> bool:
    if np.issubdtype(y.dtype, np.integer) or y.dtype == bool:
        return True
    return bool(np.all(np.floor(y) == y))


def _check_sparse(y, head, loss):
    units, rank = head.units, head.rank or 2
    if y.ndim >= rank and y.shape[-1] > 1:
        one_hot = _is_integer_valued(y) and y.min() >= 0 and y.max() <= 1
        one_hot = one_hot and bool(np.all(y.sum(axis=-1) == 1))
        if one_hot:
            return [
                (
                    "one_hot_to_sparse_loss",
                    "error",
                    f"labels are one-hot rows of width {y.shape[-1]} but {loss.name} expects "
                    "one integer class id per example",
                    "Use categorical_crossentropy, or pass np.argmax(y, axis=-1) as labels.",
                    {"label_shape": list(y.shape)},
                )
            ]
        return [
            (
                "label_width_mismatch",
                "error",
                f"labels have shape {list(y.shape)} but {loss.name} expects one integer "
                f"class id per example (shape {[None] * (rank - 1)} or with a trailing 1)",
                "Pass one class id per example.",
                {"label_shape": list(y.shape)},
            )
        ]
    if not _is_integer_valued(y):
        return [
            (
                "non_integer_class_ids",
                "error",
                f"{loss.name} expects integer class ids but the labels hold fractions, "
                f"e.g. {_examples(y[np.floor(y) != y])}",
                "Pass integer class ids; for soft targets use categorical_crossentropy.",
                {"examples": _examples(y[np.floor(y) != y])},
            )
        ]
    out = []
    valid = y if loss.ignore_class is None else y[y != loss.ignore_class]
    negative = valid[valid < 0]
    if negative.size:
        out.append(
            (
                "negative_class_id",
                "error",
                f"{negative.size} labels are negative (e.g. {_examples(negative)}); class "
                "ids must lie in [0, units)",
                "Map the labels to 0..num_classes-1 (e.g. y - y.min(), or a lookup), or "
                "set ignore_class on the loss for a padding value.",
                {"count": int(negative.size), "min": valid.min(), "examples": _examples(negative)},
            )
        )
    if units is not None:
        above = valid[valid >= units]
        if above.size:
            out.append(
                (
                    "class_id_out_of_range",
                    "error",
                    f"{above.size} labels are >= {units}, the number of output units "
                    f"(max label {valid.max()}); on a CPU fit() fails, on a GPU the loss "
                    "turns NaN",
                    f"Give the last layer max(label) + 1 = {int(valid.max()) + 1} units, or "
                    "remap the labels to 0..units-1.",
                    {
                        "count": int(above.size),
                        "max": valid.max(),
                        "units": units,
                        "examples": _examples(above),
                    },
                )
            )
    return out


def _check_categorical(y, head, loss):
    units, rank = head.units, head.rank or 2
    ids_shape = y.ndim < rank or y.shape[-1] == 1
    if ids_shape and _is_integer_valued(y) and (units or 0) > 1:
        return [
            (
                "class_ids_to_categorical_loss",
                "error",
                f"labels are integer class ids (shape {list(y.shape)}, max {y.max()}) but "
                f"{loss.name} expects one-hot rows of width {units}",
                "Use sparse_categorical_crossentropy, or one-hot the labels "
                "(keras.utils.to_categorical).",
                {"label_shape": list(y.shape), "max": y.max(), "units": units},
            )
        ]
    if units is not None and y.ndim and y.shape[-1] != units:
        return [
            (
                "label_width_mismatch",
                "error",
                f"labels have width {y.shape[-1]} but the output has {units} units",
                "Make the label width equal to the number of output units.",
                {"label_shape": list(y.shape), "units": units},
            )
        ]
    if y.min() < 0 or y.max() > 1:
        return [
            (
                "labels_outside_unit_interval",
                "error",
                f"{loss.name} expects label probabilities in [0, 1]; the labels span "
                f"[{y.min()}, {y.max()}]",
                "Pass one-hot rows (keras.utils.to_categorical) or class probabilities.",
                {"min": y.min(), "max": y.max()},
            )
        ]
    sums = y.sum(axis=-1)
    off = np.abs(sums - 1.0) > ROW_SUM_TOLERANCE
    if not off.any():
        return []
    if _is_integer_valued(y) and np.any(sums > 1):
        return [
            (
                "multi_hot_to_categorical_loss",
                "warning",
                f"{int(off.sum())} label rows mark several classes (up to {int(sums.max())}) but "
                f"{loss.name} scores one class per example",
                "For several labels per example use sigmoid outputs and binary_crossentropy.",
                {"rows": int(off.sum()), "max_row_sum": sums.max()},
            )
        ]
    return [
        (
            "labels_not_distribution",
            "warning",
            f"{int(off.sum())} label rows do not sum to 1 (sums from {sums.min()} to "
            f"{sums.max()}); {loss.name} treats them as a distribution",
            "Normalize each label row to sum to 1.",
            {"rows": int(off.sum()), "min_row_sum": sums.min(), "max_row_sum": sums.max()},
        )
    ]


def _check_binary(y, head, loss):
    units, rank = head.units, head.rank or 2
    out = []
    if units is not None and units > 1 and (y.ndim < rank or y.shape[-1] != units):
        out.append(
            (
                "label_width_mismatch",
                "error",
                f"labels have shape {list(y.shape)} but the output has {units} units; "
                f"{loss.name} needs one 0/1 label per unit",
                "For one class per example use sparse_categorical_crossentropy; for several "
                "labels per example pass multi-hot rows of width units.",
                {"label_shape": list(y.shape), "units": units},
            )
        )
    if y.min() < 0 or y.max() > 1:
        ids = _is_integer_valued(y) and y.min() >= 0
        hint = (
            "These look like class ids: use Dense(num_classes) with "
            "sparse_categorical_crossentropy."
            if ids
            else "Map the labels to 0/1 (e.g. (y + 1) / 2 for -1/+1 labels)."
        )
        out.append(
            (
                "labels_outside_unit_interval",
                "error",
                f"{loss.name} expects labels in [0, 1]; the labels span [{y.min()}, {y.max()}] "
                f"(values e.g. {_examples(y[(y < 0) | (y > 1)])})",
                hint,
                {"min": y.min(), "max": y.max(), "examples": _examples(y[(y < 0) | (y > 1)])},
            )
        )
    return out


_CHECKS = {
    "sparse_categorical": _check_sparse,
    "categorical": _check_categorical,
    "binary": _check_binary,
}


def lint_head_labels(y: Any, head: OutputHead, loss: LossInfo) -> list[Finding]:
    """Checks the labels of one output against its units and loss.

    Args:
        y: the labels of this output (array-like).
        head: the output, from `tfguard.lint._heads.output_heads`.
        loss: its loss, from `tfguard.lint._losses.resolve_loss`.

    Returns:
        The findings.

    Raises:
        TypeError: if `y` is not a numeric array-like.
    """
    y = to_numpy(y, "y")
    where = f"labels of output '{head.name}'"
    if y.size == 0 or not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
        return []
    if y.dtype == bool:
        y = y.astype(np.int64)
    if np.issubdtype(y.dtype, np.floating) and not np.all(np.isfinite(y)):
        bad = ~np.isfinite(y)
        return [
            Finding(
                id=NONFINITE,
                severity="error",
                message=f"{int(bad.sum())} of {y.size} labels are NaN or Inf.",
                where=where,
                evidence={"code": "nonfinite_labels", "count": int(bad.sum()), "size": y.size},
                suggestion="Drop or repair these examples before training.",
            )
        ]
    check = _CHECKS.get(_resolved_kind(y, head, loss))
    if check is None:
        return []
    findings = []
    for code, severity, message, suggestion, evidence in check(y, head, loss):
        findings.append(
            Finding(
                id=LABEL_RANGE,
                severity=severity,
                message=message[0].upper() + message[1:] + ".",
                where=where,
                evidence={
                    "code": code,
                    "output": head.name,
                    "units": head.units,
                    "loss": loss.name,
                    **evidence,
                },
                suggestion=suggestion,
            )
        )
    return findings


def lint_labels(y: Any, model, loss: Any = None) -> list[Finding]:
    """Checks label values against the model's output units and loss.

    Example:

    >>> import keras, numpy as np
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    >>> [f.code for f in lint_labels(np.array([0, 1, 2]), model, loss="binary_crossentropy")]
    ['labels_outside_unit_interval']

    Args:
        y: the labels: an array-like for a single-output model; a list (in
            output order) or dict (by output name) for several outputs.
        model: the Keras model the labels are for.
        loss: the loss to check against. Defaults to `None`, meaning the loss
            the model was compiled with (nothing is checked without one).

    Returns:
        A list of `Finding`.

    Raises:
        TypeError: if `model` is not a `keras.Model` or `y` is not numeric.
        ValueError: if `y` is a list/dict that does not match the outputs.
    """
    heads = output_heads(model)
    if loss is None and getattr(model, "compiled", False):
        loss = getattr(model, "loss", None)
    losses = losses_per_output(loss, [h.name for h in heads])
    if isinstance(y, dict):
        pairs = [(y[h.name], h, info) for h, info in zip(heads, losses) if h.name in y]
        if not pairs:
            raise ContractError(
                f"Received an invalid value for `y`, expected a dict keyed by output names "
                f"{[h.name for h in heads]}. Received: keys {sorted(y)}"
            )
    elif isinstance(y, (list, tuple)) and len(heads) > 1:
        if len(y) != len(heads):
            raise ContractError(
                f"Received an invalid value for `y`, expected one label array per output "
                f"({len(heads)}). Received: {len(y)} arrays"
            )
        pairs = list(zip(y, heads, losses))
    else:
        pairs = [(y, heads[0], losses[0])]
    findings = []
    for labels, head, info in pairs:
        findings.extend(lint_head_labels(labels, head, info))
    return findings
