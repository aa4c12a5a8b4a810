"""Host-side training signals: weight norms, update/weight ratios, weight histograms.

The firewall's step computes gradient norms, zero-gradient fractions,
activation statistics and gradient/activation histograms in the graph and
hands them to listeners (`tfguard.firewall.instrument`). What the step does
not see is the update itself; `WeightProbe` measures it on the host, only on
recording steps: `snapshot()` keeps a reference to every trainable variable's
value before the step (TensorFlow copies on write, so this costs no copy),
and `scalars()` after the step returns per layer

* `weight_norm/<layer>`: `||w||` of the layer's trainable variables, and
* `update_ratio/<layer>`: `||w_after - w_before|| / ||w_before||`,

from one `tf.function` call. Layers are keyed like the firewall's gradient
norms (the variable path without its last part and without the model's own
name, e.g. `dense`), so `grad_norm/<layer>`, `weight_norm/<layer>` and
`update_ratio/<layer>` line up.

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="d")], name="net")
>>> model.compile(optimizer="sgd", loss="mse")
>>> probe = WeightProbe(model)
>>> probe.snapshot()
>>> _ = model.train_on_batch(np.ones((4, 3)), np.zeros((4, 2)))
>>> sorted(probe.scalars())
['update_ratio/d', 'weight_norm/d']
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tfguard import tags
from tfguard.firewall import stats
from tfguard.summary.writers import HISTOGRAM_BUCKETS


def layer_key(variable, model_name: str | None = None) -> str:
    """The layer a variable belongs to, named as the firewall names it in `grad_norm/<layer>`.

    Keras paths are `<layer>/<var>` or `<model>/<layer>/<var>` depending on
    the model type; the model's own name is dropped, so `grad_norm/dense`,
    `weight_norm/dense` and `activation/dead_fraction/dense` agree.

    Example:

    >>> class V: path = "sequential/dense/kernel"
    >>> layer_key(V(), "sequential"), layer_key(V())
    ('dense', 'sequential/dense')
    """
    parts = (getattr(variable, "path", None) or variable.name).split("/")
    if model_name is not None and len(parts) > 2 and parts[0] == model_name:
        parts = parts[1:]
    return "/".join(parts[:-1]) if len(parts) > 1 else parts[0]


def variable_path(variable) -> str:
    """The variable's path (`sequential/dense/kernel`), the key of `hist/weights/...`."""
    return getattr(variable, "path", None) or variable.name


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


def buckets(values: tf.Tensor, count: int = HISTOGRAM_BUCKETS) -> tf.Tensor:
    """In-graph buckets `[count, 3]`: `tfguard.firewall.stats.buckets`, never XLA here.

    Example:

    >>> buckets(tf.constant([0.0, 1.0, 1.0]), 2).numpy()[:, 2].tolist()
    [1.0, 2.0]
    """
    return stats.buckets(values, count)


def _is_float(variable) -> bool:
    try:
        return tf.as_dtype(variable.dtype).is_floating
    except TypeError:
        return False


class WeightProbe:
    """Weight norms, update ratios and weight histograms of one model, on the host.

    Args:
        model: a built Keras model. The variable lists are read once; build a
            new probe if the model's trainable variables change.
    """

    def __init__(self, model: keras.Model):
        self.trainable = [v for v in model.trainable_weights if _is_float(v)]
        self.weights = [v for v in model.weights if _is_float(v)]
        self.layers: list[str] = []
        groups: dict[str, list[int]] = {}
        for index, variable in enumerate(self.trainable):
            key = layer_key(variable, model.name)
            if key not in groups:
                groups[key] = []
                self.layers.append(key)
            groups[key].append(index)
        self._groups = [groups[key] for key in self.layers]
        self._before: list[tf.Tensor] | None = None
        self._snapshot_fn = tf.function(self._snapshot_graph, autograph=False)
        self._norms_fn = tf.function(self._norms_graph, autograph=False, reduce_retracing=True)
        self._hist_fn = tf.function(self._hist_graph, autograph=False)

    # -- graphs --------------------------------------------------------------------
    def _snapshot_graph(self):
        return [tf.identity(tf.convert_to_tensor(v)) for v in self.trainable]

    def _norms_graph(self, before):
        after = [tf.cast(tf.convert_to_tensor(v), tf.float32) for v in self.trainable]
        weight_sq = [tf.reduce_sum(tf.square(w)) for w in after]
        rows = [tf.stack([tf.add_n([weight_sq[i] for i in group]) for group in self._groups])]
        if before is not None:
            old = [tf.cast(b, tf.float32) for b in before]
            delta_sq = [tf.reduce_sum(tf.square(w - b)) for w, b in zip(after, old)]
            old_sq = [tf.reduce_sum(tf.square(b)) for b in old]
            rows.append(tf.stack([tf.add_n([delta_sq[i] for i in group]) for group in self._groups]))
            rows.append(tf.stack([tf.add_n([old_sq[i] for i in group]) for group in self._groups]))
        return tf.sqrt(tf.stack(rows))

    def _hist_graph(self):
        return tf.stack([buckets(tf.convert_to_tensor(v), HISTOGRAM_BUCKETS) for v in self.weights])

    # -- host API ------------------------------------------------------------------
    def matches(self, model: keras.Model) -> bool:
        """Whether `model` still has exactly the variables this probe was built for."""
        trainable = [v for v in model.trainable_weights if _is_float(v)]
        weights = [v for v in model.weights if _is_float(v)]
        return (len(trainable) == len(self.trainable) and len(weights) == len(self.weights)
                and all(a is b for a, b in zip(trainable, self.trainable))
                and all(a is b for a, b in zip(weights, self.weights)))

    def snapshot(self) -> None:
        """Keeps the current trainable values as "before" (no copy: copy-on-write)."""
        self._before = self._snapshot_fn() if self.trainable else None

    def discard(self) -> None:
        """Forgets the snapshot."""
        self._before = None

    def scalars(self) -> dict[str, float]:
        """`weight_norm/<layer>` now, and `update_ratio/<layer>` since `snapshot()` (then forgotten).

        A layer whose weights were exactly zero before the step has no ratio
        (it is left out rather than written as infinity).
        """
        if not self.trainable:
            return {}
        before, self._before = self._before, None
        norms = self._norms_fn(before).numpy()
        out = {tags.weight_norm(layer): float(norms[0, i]) for i, layer in enumerate(self.layers)}
        if before is not None:
            for i, layer in enumerate(self.layers):
                delta, old = float(norms[1, i]), float(norms[2, i])
                if old > 0 or not np.isfinite(old):
                    out[tags.update_ratio(layer)] = delta / old
        return out

    def histograms(self) -> dict[str, np.ndarray]:
        """`hist/weights/<variable path>` -> buckets `[30, 3]` for every float weight."""
        if not self.weights:
            return {}
        buckets = self._hist_fn().numpy()
        return {tags.hist_weights(variable_path(v)): buckets[i] for i, v in enumerate(self.weights)}


__all__ = ["WeightProbe", "buckets", "layer_key", "split_signals", "variable_path"]
