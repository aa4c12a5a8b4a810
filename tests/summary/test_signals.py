"""Host-side weight signals: norms and update ratios, keyed like the firewall's gradient norms."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.summary.conftest import tiny_cnn
from tfguard import tags
from tfguard.firewall import instrument, stats
from tfguard.summary.signals import WeightProbe, buckets, layer_key, split_signals


def _by_layer(model):
    groups = {}
    for v in model.trainable_weights:
        groups.setdefault(layer_key(v, model.name), []).append(np.array(v.numpy(), dtype=np.float64).ravel())
    return {k: np.concatenate(parts) for k, parts in groups.items()}


def test_update_ratio_matches_numpy(images):
    x, y = images
    model = tiny_cnn()
    model.train_on_batch(x[:8], y[:8])
    probe = WeightProbe(model)
    before = _by_layer(model)
    probe.snapshot()
    model.train_on_batch(x[8:16], y[8:16])
    after = _by_layer(model)
    got = probe.scalars()
    assert sorted(got) == sorted([tags.weight_norm(k) for k in after] + [tags.update_ratio(k) for k in after])
    for key in after:
        np.testing.assert_allclose(got[tags.weight_norm(key)], np.linalg.norm(after[key]), rtol=1e-5)
        expected = np.linalg.norm(after[key] - before[key]) / np.linalg.norm(before[key])
        np.testing.assert_allclose(got[tags.update_ratio(key)], expected, rtol=1e-4)
        assert 0 < got[tags.update_ratio(key)] < 1
    # the snapshot is used once: the next call has norms only
    assert not any(t.startswith("update_ratio/") for t in probe.scalars())


def test_weight_histograms_cover_every_float_weight(images):
    model = tiny_cnn()
    model.build((None, 8, 8, 1))
    histograms = WeightProbe(model).histograms()
    assert sorted(histograms) == sorted(tags.hist_weights(v.path) for v in model.weights)
    for tag, counts in histograms.items():
        assert counts.shape == (30, 3)
        size = next(v for v in model.weights if tags.hist_weights(v.path) == tag).numpy().size
        assert counts[:, 2].sum() == size


def test_weight_buckets_match_the_firewall_buckets():
    rng = np.random.default_rng(1)
    for values in (rng.normal(size=5000), np.array([3.0] * 7), np.array([]), np.array([1.0, np.nan, -np.inf, 2.0])):
        tensor = tf.constant(values, tf.float32)
        ours, theirs = buckets(tensor).numpy(), stats.buckets(tensor).numpy()
        np.testing.assert_allclose(ours[:, :2], theirs[:, :2], rtol=1e-6, atol=1e-6)
        assert ours[:, 2].sum() == theirs[:, 2].sum() == values.size
        # a value sitting exactly on an inner edge may round to either side
        assert np.abs(ours[:, 2] - theirs[:, 2]).sum() <= 2


def test_layer_keys_line_up_with_the_firewall_gradient_norms(images):
    x, y = images
    model = tiny_cnn()
    seen = {}
    inst = instrument(model)
    inst.request(scalars_every=1)
    inst.add_listener(lambda step, signals: seen.update(signals))
    model.fit(x[:8], y[:8], batch_size=8, verbose=0)
    grad_layers = {t[len("grad_norm/"):] for t in seen if t.startswith("grad_norm/") and t != tags.GLOBAL_GRAD_NORM}
    assert grad_layers == set(WeightProbe(model).layers) == {"conv", "hidden", "out"}


def test_split_signals():
    scalars, histograms = split_signals({"a": 1.0, "b": np.float32(2), "hist/x": np.zeros((30, 3))})
    assert scalars == {"a": 1.0, "b": 2.0} and list(histograms) == ["hist/x"]
