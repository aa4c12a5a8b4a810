"""`lint_outliers`: input values tens of times larger than the input's own scale.

Standardizing a feature that is almost always the same value (a pixel that
is 0 in all but a few images, a rare one-hot category) divides by a tiny
standard deviation: the few other rows land `sqrt(n / k)` standard
deviations out (one row in 1,500: 39). Per-batch statistics look normalized
(unit variance, mean 0), yet those rows carry inputs tens of times larger
than the rest: through `exp` (a VAE's log-variance), a softplus or a deep
stack, they overflow the loss (defects4ml 006: a VAE's cost from 3.7e6 to
2.4e12 after `StandardScaler` on MNIST pixels).

This check reads the in-memory `x` given to `fit` (every row) and reports
the features with values beyond `MAX_RATIO` times the root mean square of
all input values (the scale the first layer sees; scaling a feature by its
range keeps it within about 3): which feature, how far out, which rows,
and how much of the feature is one value. It is evidence, not a verdict: heavy-tailed features are
often harmless, so the diagnosis (`rules.data.unnormalized_input`) turns
it into a finding only in a run that training showed hurt.

Example:

>>> import numpy as np
>>> x = np.zeros((1500, 4), "float32"); x[:, :3] = np.random.default_rng(0).normal(size=(1500, 3))
>>> x[7, 3] = 1.0
>>> x = (x - x.mean(0)) / x.std(0)
>>> (f,) = lint_outliers(x)
>>> f.evidence["feature"], round(f.evidence["peak"], 1), f.evidence["rows"]
(3, 38.7, '7')
>>> lint_outliers((x - x.min(0)) / (x.max(0) - x.min(0)))  # scaled by its range: at most 1
[]
"""

from __future__ import annotations

import numpy as np

from tfguard._findings import Finding, fmt
from tfguard.lint._symptom_ids import UNNORMALIZED_INPUT

MAX_RATIO = 20.0
"""How many times the root mean square of all input values a value must reach to be an extreme
outlier (standardized normal features of a million rows stay within 5.5; a standardized feature
nonzero in 1 row of 400 reaches 20; pixels scaled to [0, 1] reach about 3)."""

MIN_ROWS = 100
"""Fewest rows to judge a feature's spread."""

MAX_VALUES = 50_000_000
"""Most values read (the first rows of a larger input)."""

CHUNK_VALUES = 4_000_000
"""Values converted to float64 at a time."""

LISTED = 5
"""Rows and features named in a message; the evidence counts them all."""


def _matrix(x) -> np.ndarray | None:
    """`x` as a 2-D float array (rows, features), or `None` for anything else (dicts, ids, strings)."""
    if isinstance(x, (list, tuple)) and x and hasattr(x[0], "shape"):
        x = x[0]
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        return None
    a = np.asarray(x)
    if a.dtype.kind != "f" or a.ndim < 2 or len(a) < MIN_ROWS:
        return None
    return a.reshape(len(a), -1)


def _scale(a: np.ndarray) -> tuple[float, np.ndarray]:
    """`(root mean square of the finite values, each feature's largest finite |value|)`, read a
    block of rows at a time (a float64 copy of the whole input would double its memory)."""
    total, count, peak = 0.0, 0, np.zeros(a.shape[1])
    rows = max(1, CHUNK_VALUES // a.shape[1])
    for start in range(0, len(a), rows):
        block = np.abs(a[start:start + rows].astype(np.float64))
        block[~np.isfinite(block)] = 0.0  # a NaN or Inf is another check's finding (nonfinite)
        total += float(np.sum(np.square(block)))
        count += block.size
        peak = np.maximum(peak, block.max(axis=0))
    return (total / max(count, 1)) ** 0.5, peak


def lint_outliers(x) -> list[Finding]:
    """The finding for features of `x` with values beyond `MAX_RATIO` times the input's scale.

    Args:
        x: the in-memory inputs given to `fit` (a float array of rows; a list of arrays: the
            first). Anything else is not read.

    Returns:
        One `unnormalized_input` finding (info, code `extreme_outliers`), or `[]`.
    """
    a = _matrix(x)
    if a is None:
        return []
    a = a[: max(MIN_ROWS, MAX_VALUES // a.shape[1])]
    rms, peak = _scale(a)
    if not rms > 0 or not np.isfinite(rms):
        return []
    features = np.flatnonzero(peak > MAX_RATIO * rms)
    if not len(features):
        return []
    worst = int(features[np.argmax(peak[features])])
    far = np.abs(np.nan_to_num(a[:, features], posinf=0.0, neginf=0.0)) > MAX_RATIO * rms
    rows = np.flatnonzero(far[:, list(features).index(worst)])
    outlier_rows = int(np.any(far, axis=1).sum())
    column = a[:, worst][np.isfinite(a[:, worst])]
    values, counts = np.unique(column, return_counts=True)
    mode, mode_share = float(values[np.argmax(counts)]), float(counts.max() / len(column))
    std = float(np.std(column))
    listed = ", ".join(map(str, rows[:LISTED])) + (", ..." if len(rows) > LISTED else "")
    others = f"; {len(features)} features in all, in {outlier_rows} rows" if len(features) > 1 else ""
    ratio = float(peak[worst] / rms)
    message = (f"feature {worst} of the input reaches {fmt(float(peak[worst]))} in row(s) {listed}, "
               f"{fmt(ratio)}x the root mean square of all input values ({fmt(rms)})"
               + (f"; {100 * mode_share:.1f}% of its {len(column)} rows hold the value {fmt(mode)} "
                  f"(its std is {fmt(std)}: a feature almost always the same, standardized)"
                  if mode_share >= 0.9 else "")
               + f"{others}.")
    return [Finding(
        id=UNNORMALIZED_INPUT, severity="info", message=message, where="fit(x=...)",
        evidence={"code": "extreme_outliers", "feature": worst, "peak": float(peak[worst]),
                  "ratio_to_rms": ratio, "input_rms": rms, "feature_std": std,
                  "rows": ", ".join(map(str, rows[:LISTED])),
                  "outlier_rows_of_feature": int(len(rows)), "features_beyond": int(len(features)),
                  "rows_with_outliers": outlier_rows, "mode_share": mode_share,
                  "rows_checked": int(len(a)), "max_ratio": MAX_RATIO},
        suggestion=("Scale features that are almost always one value by their range "
                    "(MinMaxScaler, or x / max) instead of their standard deviation, clip "
                    "standardized values (`np.clip(x, -5, 5)`), or drop features that are almost "
                    "constant."),
    )]


__all__ = ["LISTED", "CHUNK_VALUES", "MAX_RATIO", "MAX_VALUES", "MIN_ROWS", "lint_outliers"]
