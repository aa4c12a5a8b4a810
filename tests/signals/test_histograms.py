"""Histograms the host takes after the step: the weights' buckets, from one traced function per set of weights."""

from __future__ import annotations

import keras
import numpy as np

from tfguard._signals.histograms import HostHistograms, histograms_of


def test_the_host_buckets_weights_as_the_step_would_with_one_trace_per_set_of_weights():
    rng = np.random.default_rng(5)
    weights = [(f"hist/weights/w{i}", keras.Variable(rng.normal(size=shape).astype("float32")))
               for i, shape in enumerate([(4, 4), (4,), (4, 4), (300, 7)])]
    host = HostHistograms()
    first = host(weights)
    assert list(first) == [tag for tag, _ in weights]
    eager = histograms_of([v for _, v in weights]).numpy()
    for (tag, _), expected in zip(weights, eager):  # the edges to an ulp (a graph fuses a multiply-add)
        np.testing.assert_array_equal(first[tag][:, 2], expected[:, 2])
        np.testing.assert_allclose(first[tag][:, :2], expected[:, :2], rtol=1e-6, atol=1e-6)
    weights[0][1].assign(weights[0][1] * 3.0)  # read anew at every call
    second = host(weights)
    np.testing.assert_allclose(second["hist/weights/w0"], histograms_of([weights[0][1]]).numpy()[0], rtol=1e-6)
    (function,) = host._functions.values()
    assert function.experimental_get_tracing_count() == 1
    assert host([]) == {}
