"""The measure of a run and the verdict of a trial: numbers in, one word out.

A trial is judged by one number, the *measure*: the final validation loss
of the trained model (`val_loss`), or its training loss (`loss`) when the
script trains without validation data. The curve of a model's fits is the
concatenation of their per-epoch logs (a script calling `fit(epochs=1)` in
a loop has one curve). Where the model's final weights are not the last
epoch's (an `EarlyStopping` that restored its best epoch), the measure is
the value of the epoch whose weights the model kept.

The verdict compares the trial's measure (`after`) with the original run's
(`before`), lower is better, with a relative `margin`:

- `"improved"`: `after < before - margin * |before|`, or the original was
  not finite (NaN, Inf, no number because training failed) and the trial is;
- `"worse"`: `after > before + margin * |before|`, or the trial is not
  finite where the original was;
- `"no better"`: anything in between, and both not finite.

Only `"improved"` is a fix.

Example:

>>> verdict(2.30, 0.41), verdict(0.41, 0.40), verdict(0.41, 0.50), verdict(float("nan"), 0.4)
('improved', 'no better', 'worse', 'improved')
>>> curve = concat_logs([{"loss": 1.0, "val_loss": 1.2}, {"loss": 0.5, "val_loss": 0.9}])
>>> measure_name(curve), final_value(curve, "val_loss")
('val_loss', 0.9)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

DEFAULT_MARGIN = 0.05
"""The relative change of the measure a verdict needs: 5 % of the original's value."""

VERDICTS = ("improved", "no better", "worse")


def _finite(value) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def verdict(before: float | None, after: float | None, margin: float = DEFAULT_MARGIN) -> str:
    """`"improved"`, `"no better"` or `"worse"` for a measure where lower is better.

    Example:

    >>> verdict(1.0, 0.96), verdict(1.0, 0.94), verdict(1.0, float("inf"))
    ('no better', 'improved', 'worse')

    Args:
        before: the original run's measure (`None` or NaN when it has none).
        after: the trial's measure.
        margin: the relative change that counts. Defaults to `0.05`.

    Returns:
        One of `VERDICTS`.
    """
    good_before, good_after = _finite(before), _finite(after)
    if not good_after:
        return "worse" if good_before else "no better"
    if not good_before:
        return "improved"
    if after < before - margin * abs(before):
        return "improved"
    if after > before + margin * abs(before):
        return "worse"
    return "no better"


def concat_logs(epochs: Iterable[Mapping]) -> dict[str, list[float]]:
    """Per-epoch logs (dicts of numbers) as one curve per key; a key missing in an epoch is NaN.

    Example:

    >>> concat_logs([{"loss": 2}, {"loss": 1, "acc": 0.5}])
    {'loss': [2.0, 1.0], 'acc': [nan, 0.5]}
    """
    epochs = list(epochs)
    keys: dict[str, None] = {}
    for logs in epochs:
        keys.update(dict.fromkeys(k for k, v in logs.items() if _number(v)))
    return {k: [float(logs[k]) if _number(logs.get(k)) else math.nan for logs in epochs]
            for k in keys}


def _number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, (str, bytes))


def measure_name(curve: Mapping[str, list]) -> str:
    """`"val_loss"` when the curve has validation losses, else `"loss"`."""
    values = curve.get("val_loss") or []
    return "val_loss" if any(_finite(v) for v in values) else "loss"


def final_value(curve: Mapping[str, list], name: str, epochs: int | None = None) -> float:
    """The last value of `curve[name]` (of its first `epochs` values when given), or NaN.

    Example:

    >>> final_value({"loss": [3.0, 2.0, 1.0]}, "loss", epochs=2)
    2.0
    """
    values = list(curve.get(name) or [])
    if epochs is not None:
        values = values[:epochs]
    return float(values[-1]) if values else math.nan


__all__ = ["DEFAULT_MARGIN", "VERDICTS", "concat_logs", "final_value", "measure_name", "verdict"]
