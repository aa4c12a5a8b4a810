"""Weight, gradient and activation distributions over time, as TensorBoard's distributions tab draws them.

Every histogram the logs hold for a layer (`hist/weights/<variable>`,
`hist/gradients/<variable>`, `hist/activations/<layer>`) becomes one small
panel: the percentiles TensorBoard's distributions tab uses (0, 6.68,
15.87, 30.85, 50, 69.15, 84.13, 93.32 and 100 %, i.e. the median, +-1, 2
and 3 standard deviations of a normal and the extremes) computed from the
buckets at every logged step, drawn as nested bands around the median.
`distributions_png` lays one layer's panels out as small multiples.

Example:

>>> import numpy as np
>>> buckets = np.array([[0.0, 1.0, 5.0], [1.0, 2.0, 5.0]])
>>> percentiles(buckets, [0, 5000, 10000]).tolist()
[0.0, 1.0, 2.0]
>>> layer_histograms({"hist/weights/model/dense/kernel": [], "hist/weights/model/dense_1/kernel": [],
...                   "hist/activations/dense": []}, "dense")
['hist/weights/model/dense/kernel', 'hist/activations/dense']
"""

from __future__ import annotations

import numpy as np

from tfguard import _tags
from tfguard.diagnose._report.plots.kit import figure, label, png

BASIS_POINTS = (0, 668, 1587, 3085, 5000, 6915, 8413, 9332, 10000)
"""TensorBoard's percentiles of a distribution, in basis points (`NORMAL_HISTOGRAM_BPS`)."""
MAX_PANELS = 8
"""The most panels one layer's figure draws."""
MAX_STEPS = 400
"""The most steps one panel draws (longer histories are strided)."""
_KINDS = (("weights", _tags.HIST + "weights/"), ("gradients", _tags.HIST + "gradients/"),
          ("activations", _tags.HIST + "activations/"))
_BAND = "#e8710a"  # TensorBoard's distribution orange


def percentiles(buckets, basis_points=BASIS_POINTS) -> np.ndarray:
    """The values below which the given fractions of a histogram's counts lie.

    Linear inside a bucket, as TensorBoard's `compress_histogram` does.

    Args:
        buckets: a `[k, 3]` array of `(left, right, count)`.
        basis_points: the fractions, in 1/10000. Defaults to `BASIS_POINTS`.

    Returns:
        One value per basis point (NaN for an empty histogram).
    """
    b = np.asarray(buckets, dtype=np.float64).reshape(-1, 3)
    counts = np.where(np.isfinite(b[:, 2]) & (b[:, 2] > 0), b[:, 2], 0.0)
    total = counts.sum()
    if not len(b) or total <= 0:
        return np.full(len(basis_points), np.nan)
    cum = np.cumsum(counts)
    targets = total * np.asarray(basis_points, dtype=np.float64) / 10000.0
    index = np.minimum(np.searchsorted(cum, targets, side="left"), len(b) - 1)
    below = np.where(index > 0, cum[index - 1], 0.0)
    inside = np.where(counts[index] > 0, (targets - below) / np.maximum(counts[index], 1e-300), 0.0)
    left, right = b[index, 0], b[index, 1]
    return left + (right - left) * np.clip(inside, 0.0, 1.0)


def _matches(variable: str, layer: str) -> bool:
    parts, want = variable.split("/"), layer.split("/")
    return any(parts[i:i + len(want)] == want for i in range(len(parts) - len(want) + 1))


def layer_histograms(histograms, layer: str) -> list[str]:
    """The histogram tags of one layer: its variables' weights and gradients, then its activations.

    A variable belongs to the layer when the layer's name is a run of the
    `/`-separated parts of its path (`sequential/dense/kernel` is layer
    `dense`'s, never `dense_1`'s).

    Args:
        histograms: tag -> points (`Signals.histograms`).
        layer: the layer (or variable) a finding names.

    Returns:
        The tags, weights first, then gradients, then activations.
    """
    found = []
    for _kind, prefix in _KINDS:
        found += [t for t in histograms if t.startswith(prefix) and _matches(t[len(prefix):], layer)]
    return found


def _bands(ax, points) -> None:
    points = points[:: -(-len(points) // MAX_STEPS)] if len(points) > MAX_STEPS else points
    steps = np.array([p[0] for p in points], dtype=np.float64)
    q = np.array([percentiles(p[1]) for p in points])
    if len(steps) == 1:  # one step: a narrow column, so the bands still show
        steps, q = np.array([steps[0] - 0.5, steps[0] + 0.5]), np.repeat(q, 2, axis=0)
    n = len(BASIS_POINTS)
    for i in range(n // 2):
        ax.fill_between(steps, q[:, i], q[:, n - 1 - i], color=_BAND, alpha=0.18 + 0.12 * i,
                        linewidth=0)
    ax.plot(steps, q[:, n // 2], color="#a04000", linewidth=1.0)


def distributions_png(signals, layer: str, histogram_tags: list[str] | None = None) -> bytes | None:
    """Small multiples of one layer's distributions over steps, as PNG bytes (or `None`).

    Args:
        signals: the run (its `histograms`).
        layer: the layer's name (see `layer_histograms`).
        histogram_tags: the tags to draw. Defaults to `None`
            (`layer_histograms(signals.histograms, layer)`).

    Returns:
        PNG bytes, or `None` when the layer has no histogram with counts.
    """
    chosen = histogram_tags if histogram_tags is not None else layer_histograms(signals.histograms, layer)
    chosen = [t for t in chosen if signals.histograms.get(t)][:MAX_PANELS]
    if not chosen:
        return None
    cols = min(4, len(chosen))
    rows = -(-len(chosen) // cols)
    fig = figure(2.6 * cols, 2.0 * rows + 0.3)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, tag in zip(axes, chosen):
        _bands(ax, signals.histograms[tag])
        kind, _, name = tag[len(_tags.HIST):].partition("/")
        ax.set_title(label(f"{kind}: {name}", 38), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        ax.set_xlabel("step", fontsize=7)
    for ax in axes[len(chosen):]:
        ax.set_visible(False)
    fig.suptitle(label(f"distributions of '{layer}' over steps (percentile bands, median line)", 90),
                 fontsize=9)
    fig.tight_layout()
    return png(fig)
