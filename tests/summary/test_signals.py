"""split_signals: the listener's dict into scalars and histograms."""

from __future__ import annotations

import numpy as np

from tfguard.summary._signals import split_signals


def test_split_signals():
    scalars, histograms = split_signals({"a": 1.0, "b": np.float32(2), "hist/x": np.zeros((30, 3))})
    assert scalars == {"a": 1.0, "b": 2.0} and list(histograms) == ["hist/x"]
    assert isinstance(scalars["b"], float)
