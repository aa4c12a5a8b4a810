"""What the instrumented step hands the logger, split into scalars and histograms.

The firewall's recording step computes every step-level signal in the
graph (gradient norms, zero-gradient fractions, activation statistics,
weight norms and update ratios, gradient/activation/weight histograms) and
hands them to listeners as one `tag -> value` dict
(`tfguard._firewall.instrument`); `split_signals` separates the scalars
from the histograms for the writers.

Example:

>>> import numpy as np
>>> scalars, histograms = split_signals({"grad_norm/global": 2.0, "hist/gradients/d/kernel": np.zeros((30, 3))})
>>> scalars, list(histograms)
({'grad_norm/global': 2.0}, ['hist/gradients/d/kernel'])
"""

from __future__ import annotations

import numpy as np


def split_signals(signals: dict) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Splits a listener's `signals` into scalars (floats) and histograms (`[k, 3]` arrays).

    Example:

    >>> split_signals({"grad_norm/global": 1.0, "hist/gradients/d/kernel": np.zeros((30, 3))})[0]
    {'grad_norm/global': 1.0}
    """
    scalars: dict[str, float] = {}
    histograms: dict[str, np.ndarray] = {}
    for tag, value in signals.items():
        if isinstance(value, np.ndarray) and value.ndim == 2:
            histograms[tag] = value
        else:
            scalars[tag] = float(value)
    return scalars, histograms


__all__ = ["split_signals"]
