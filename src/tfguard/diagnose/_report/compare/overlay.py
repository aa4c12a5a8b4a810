"""`overlay_png`: the curves of several runs on one axis, for a sweep's comparison.

One panel per metric (the loss, then the first accuracy-like metric):
each run in its own colour (`kit.run_color`, the same as its swatch
in the comparison table), validation solid and training dashed, by epoch
so runs of different batch sizes line up.

Example:

>>> from tfguard.diagnose import Signals
>>> runs = [Signals.from_arrays({"train/loss": (None, [1.0, 0.5 + i / 10]),
...                              "val/loss": (None, [1.1, 0.6])}, run=f"lr_{i}") for i in range(3)]
>>> overlay_png(runs)[:4]
b'\\x89PNG'
>>> overlay_png([]) is None
True
"""

from __future__ import annotations

from tfguard import _tags
from tfguard.diagnose._inputs.signals import Signals
from tfguard.diagnose._report.plots.curves import is_learning_rate
from tfguard.diagnose._report.plots.kit import (
    MAX_LINES,
    figure,
    finish,
    label,
    png,
    positive_log,
    run_color,
    xy,
)


def _metrics(runs: list[Signals]) -> list[str]:
    names = []
    for s in runs:
        names += [n for n in s.metric_names() if n not in names and not is_learning_rate(_tags.train(n))]
    rest = [n for n in names if n != "loss"]
    return (["loss"] if "loss" in names else []) + rest[:1]


def overlay_png(runs: list[Signals], metrics: list[str] | None = None) -> bytes | None:
    """The runs' epoch curves overlaid, one panel per metric, as PNG bytes (or `None`).

    Args:
        runs: the runs' signals, in the comparison's order (colour `i` for run
            `i`; `None` for a run without signals).
        metrics: metric names to draw. Defaults to `None` (the loss and the
            first other metric).

    Returns:
        PNG bytes, or `None` when no run has any of the metrics.
    """
    present = [s for s in runs if s is not None]
    metrics = metrics if metrics is not None else _metrics(present)
    panels = [m for m in metrics
              if any(s.series(t) is not None for s in present for t in (_tags.train(m), _tags.val(m)))]
    if not panels:
        return None
    fig = figure(8, 3.2 * len(panels))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, metric in zip(axes, panels):
        plotted = []
        for i, s in enumerate(runs[:MAX_LINES]):
            if s is None:  # a run without signals keeps its colour index
                continue
            for tag, style in ((_tags.val(metric), "-"), (_tags.train(metric), "--")):
                series = s.series(tag)
                if series is None:
                    continue
                x, y = xy(series, False)
                ax.plot(x, y, linestyle=style, color=run_color(i), linewidth=1.3, marker="o",
                        markersize=2.5, label=label(s.run, 30) if tag == _tags.val(metric) or
                        s.series(_tags.val(metric)) is None else None)
                plotted.append(y)
        if metric == "loss":
            positive_log(ax, plotted)
        title = f"{metric}: validation solid, training dashed"
        if len(runs) > MAX_LINES:
            title += f" (first {MAX_LINES} of {len(runs)} runs)"
        finish(ax, "epoch", title)
    fig.tight_layout()
    return png(fig)
