"""`lint_inputs`: the scale of the input batch against the model's first layers.

A network whose first Dense or Conv layer sees raw 0-255 pixels, or features
whose scales differ by a factor of a million, trains slowly or diverges: the
first layer's gradients are dominated by the largest feature. Keras does not
complain. This check reads one batch and the front of the model (the layers
before the first layer with weights) and reports:

| code | severity | what |
|---|---|---|
| `raw_pixels` | warning | image-like values in [0, 255] with no Rescaling/Normalization in front |
| `double_rescaling` | warning | inputs already in [0, 1] fed to a `Rescaling(1/255)` |
| `feature_scale_spread` | warning | per-feature std ratio above `max_std_ratio` |
| `large_offset` | warning | a feature whose mean is far from 0 compared with its spread |
| `large_magnitude` | warning | values above `max_abs_value` |
| `nonfinite_input` | error | NaN or Inf in the batch (`id="nonfinite"`) |

All other findings have `id="unnormalized_input"`. When the front of the model
normalizes (Rescaling, Normalization, BatchNormalization, LayerNormalization,
...) only non-finite values are reported; when it starts with a lookup or an
Embedding (ids, not magnitudes), nothing is; when it starts with an op tfguard
cannot read (a `Lambda`, `x / 255` written with `keras.ops`), nothing is.

Example:

>>> import keras, numpy as np
>>> x = np.random.default_rng(0).integers(0, 256, (8, 28, 28), dtype=np.uint8)
>>> model = keras.Sequential([keras.Input((28, 28)), keras.layers.Flatten(), keras.layers.Dense(10)])
>>> [f.code for f in lint_inputs(x, model)]
['raw_pixels']
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from tfguard._errors import ContractError
from tfguard._findings import Finding
from tfguard.lint._front import front_of_model
from tfguard.lint._labels import to_numpy
from tfguard.lint._symptom_ids import NONFINITE, UNNORMALIZED_INPUT

#: Largest ratio between the largest and smallest per-feature standard deviation.
MAX_STD_RATIO = 1e3
#: Largest |mean| of a feature (when it also exceeds `OFFSET_STD_RATIO` x its std).
MAX_ABS_MEAN = 1e2
#: How many stds the mean must be from 0 for `large_offset`.
OFFSET_STD_RATIO = 3.0
#: Largest |value| in a batch before `large_magnitude`.
MAX_ABS_VALUE = 1e3
#: Fewest features of a 2-D integer batch in [0, 255] to read it as flattened pixels.
MIN_PIXEL_FEATURES = 64


def _input_names(model) -> list[str]:
    if model is None:
        return []
    try:
        return [t.name for t in (model.inputs or [])]
    except (AttributeError, ValueError):
        return []


def _finding(code, severity, message, where, evidence, suggestion, symptom=UNNORMALIZED_INPUT):
    return Finding(
        id=symptom,
        severity=severity,
        message=message,
        where=where,
        evidence={"code": code, **evidence},
        suggestion=suggestion,
    )


def _front_note(kind: str) -> str:
    if kind == "none":
        return " (no model given: unless the model rescales its inputs)"
    if kind == "subclassed":
        return (
            " (no normalizing layer among the subclassed model's layers; tfguard cannot see call())"
        )
    return ""


def _check_array(
    x: np.ndarray,
    name: str,
    front: tuple[str, Any],
    max_std_ratio: float,
    max_abs_mean: float,
    max_abs_value: float,
) -> list[Finding]:
    where = f"input '{name}'"
    if x.size == 0 or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
        return []
    kind, layer = front
    values = x.astype(np.float64)
    finite = np.isfinite(values)
    if not finite.all():
        count = int((~finite).sum())
        return [
            _finding(
                "nonfinite_input",
                "error",
                f"{count} of {x.size} input values are NaN or Inf.",
                where,
                {"count": count, "size": x.size},
                "Drop or impute these values before training (tf.data: .filter or .map).",
                symptom=NONFINITE,
            )
        ]
    if kind == "ids":
        return []
    low, high = float(values.min()), float(values.max())
    integer_valued = bool(np.all(np.floor(values) == values))
    image_like = x.ndim >= 3 or (
        x.ndim == 2 and integer_valued and x.shape[-1] >= MIN_PIXEL_FEATURES
    )
    pixels = (x.dtype == np.uint8 or image_like) and low >= 0 and 1.5 < high <= 255
    evidence = {"dtype": str(x.dtype), "shape": list(x.shape), "min": low, "max": high}
    if kind == "normalized":
        scale = getattr(layer, "scale", None)
        if (
            type(layer).__name__ == "Rescaling"
            and isinstance(scale, (int, float))
            and 0 < abs(scale) <= 0.1
            and np.issubdtype(x.dtype, np.floating)
            and high <= 1.0
            and low >= -1.0
        ):
            return [
                _finding(
                    "double_rescaling",
                    "warning",
                    f"Inputs are already in [{low:g}, {high:g}] but the model's Rescaling "
                    f"layer '{layer.name}' multiplies them by {scale:g} again, so the first "
                    f"layer sees values no larger than {abs(scale) * max(abs(low), high):.3g}.",
                    where,
                    {**evidence, "layer": layer.name, "scale": scale},
                    "Rescale once: drop the division in the data pipeline or the Rescaling layer.",
                )
            ]
        return []
    if kind in ("unknown", "pass"):
        return []
    note = _front_note(kind)
    if pixels:
        divisor = 255 if high > 16 else int(round(high))
        return [
            _finding(
                "raw_pixels",
                "warning",
                f"Input values look like raw pixels ({x.dtype}, range [{low:g}, {high:g}]) and "
                f"reach the first layer with weights unscaled{note}.",
                where if layer is None else f"{where} -> layer '{layer.name}'",
                {**evidence, "integer_valued": integer_valued, "front": kind},
                f"Put keras.layers.Rescaling(1.0 / {divisor}) first in the model, or divide "
                f"by {divisor} in the tf.data map.",
            )
        ]
    findings = []
    if x.ndim == 2 and x.shape[0] >= 2 and x.shape[1] >= 1:
        mean, std = values.mean(axis=0), values.std(axis=0)
        varying = std > 1e-8 * np.maximum(1.0, np.abs(mean))
        if varying.sum() >= 2:
            idx = np.flatnonzero(varying)
            big, small = idx[np.argmax(std[idx])], idx[np.argmin(std[idx])]
            ratio = float(std[big] / std[small])
            if ratio > max_std_ratio:
                findings.append(
                    _finding(
                        "feature_scale_spread",
                        "warning",
                        f"Feature scales differ by a factor of {ratio:.3g} (std of feature "
                        f"{big} is {std[big]:.4g}, of feature {small} {std[small]:.4g}); the "
                        f"largest features dominate the first layer's gradients{note}.",
                        where,
                        {
                            **evidence,
                            "std_ratio": ratio,
                            "threshold": max_std_ratio,
                            "largest_std_feature": int(big),
                            "largest_std": std[big],
                            "smallest_std_feature": int(small),
                            "smallest_std": std[small],
                        },
                        "Standardize the features: keras.layers.Normalization() adapted on "
                        "the training data, first in the model.",
                    )
                )
        offset = (np.abs(mean) > max_abs_mean) & (np.abs(mean) > OFFSET_STD_RATIO * std)
        if offset.any():
            cols = np.flatnonzero(offset)
            worst = cols[np.argmax(np.abs(mean[cols]))]
            findings.append(
                _finding(
                    "large_offset",
                    "warning",
                    f"{cols.size} feature{'s have' if cols.size > 1 else ' has'} a mean far "
                    "from 0 compared with its spread "
                    f"(feature {worst}: mean {mean[worst]:.4g}, std {std[worst]:.4g}); the "
                    f"first layer has to learn to cancel the offset{note}.",
                    where,
                    {
                        **evidence,
                        "features": cols[:20].tolist(),
                        "worst_feature": int(worst),
                        "worst_mean": mean[worst],
                        "worst_std": std[worst],
                        "threshold": max_abs_mean,
                    },
                    "Center and scale the features: keras.layers.Normalization() adapted on "
                    "the training data, first in the model.",
                )
            )
    peak = max(abs(low), abs(high))
    if not findings and peak > max_abs_value:
        findings.append(
            _finding(
                "large_magnitude",
                "warning",
                f"Input values reach {peak:.4g} (threshold {max_abs_value:g}); with default "
                f"initializers the first layer's pre-activations and gradients are that large "
                f"too{note}.",
                where,
                {**evidence, "threshold": max_abs_value},
                "Scale the inputs to about unit range: keras.layers.Normalization() or "
                "Rescaling first in the model.",
            )
        )
    return findings


def lint_inputs(
    x: Any,
    model=None,
    *,
    max_std_ratio: float = MAX_STD_RATIO,
    max_abs_mean: float = MAX_ABS_MEAN,
    max_abs_value: float = MAX_ABS_VALUE,
) -> list[Finding]:
    """Checks the scale of an input batch against the front of the model.

    Example:

    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(64, 3)) * [1.0, 1.0, 1e5]
    >>> [f.code for f in lint_inputs(x)]
    ['feature_scale_spread']

    Args:
        x: one batch: an array-like, a list of arrays (one per model input) or
            a dict of arrays keyed by input name.
        model: the Keras model the batch is for. Defaults to `None` (the data
            is judged on its own and messages say the model was not seen).
        max_std_ratio: largest allowed ratio of per-feature standard
            deviations in a 2-D batch. Defaults to `MAX_STD_RATIO` (1e3).
        max_abs_mean: largest allowed |mean| of a feature whose mean is also
            more than 3 stds from 0. Defaults to `MAX_ABS_MEAN` (1e2).
        max_abs_value: largest allowed |value| when no other scale finding
            applies. Defaults to `MAX_ABS_VALUE` (1e3).

    Returns:
        A list of `Finding`.

    Raises:
        TypeError: if `x` is not numeric, or `model` is not a `keras.Model`.
        ValueError: if a threshold is not positive.
    """
    for name, value in (
        ("max_std_ratio", max_std_ratio),
        ("max_abs_mean", max_abs_mean),
        ("max_abs_value", max_abs_value),
    ):
        if not value > 0:
            raise ContractError(
                f"Received an invalid value for `{name}`, expected a positive number. "
                f"Received: {name}={value!r}"
            )
    if model is not None and not isinstance(model, keras.Model):
        raise ContractError(
            f"Received an invalid value for `model`, expected a keras.Model or None. "
            f"Received: model of type {type(model).__name__}"
        )
    if isinstance(x, dict):
        names = _input_names(model)
        items = [(str(k), v, names.index(k) if k in names else 0) for k, v in x.items()]
    elif isinstance(x, (list, tuple)) and x and all(hasattr(v, "shape") for v in x):
        items = [(f"input_{i}", v, i) for i, v in enumerate(x)]
    else:
        items = [((_input_names(model) or ["input_0"])[0], x, 0)]
    findings = []
    for name, value, index in items:
        front = front_of_model(model, index) if model is not None else ("none", None)
        findings.extend(
            _check_array(
                to_numpy(value, "x"), name, front, max_std_ratio, max_abs_mean, max_abs_value
            )
        )
    return findings
