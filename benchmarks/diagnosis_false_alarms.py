"""Measure false alarms and threshold margins on many healthy trainings (a script, not a test).

Runs healthy variants (architectures, optimizers, data sets, seeds) under
`LiveDiagnosis`, prints every warning/error found (each one is a false
alarm) and, per rule, how close the healthy runs came to its threshold.

    TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python benchmarks/diagnosis_false_alarms.py [seeds]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

# the project's root, for the programs the tests train (`tests.diagnose`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import keras
import numpy as np
from sklearn.datasets import load_breast_cancer
from tests.diagnose import programs as P

from tfguard.diagnose import LiveDiagnosis, Thresholds


def cancer():
    x, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order].astype("float32")
    x = ((x - x.mean(0)) / x.std(0)).astype("float32")
    return (x[:420], y[:420]), (x[420:], y[420:])


def cls(hidden, act="relu", extra=()):
    def build(inputs, units, out_act):
        layers = [keras.Input((inputs,))]
        for i, u in enumerate(hidden):
            layers.append(keras.layers.Dense(u, activation=act, name=f"hidden_{i}"))
            layers.extend(extra)
        layers.append(keras.layers.Dense(units, activation=out_act, name="out"))
        return keras.Sequential(layers)
    return build


SCE, BCE = "sparse_categorical_crossentropy", "binary_crossentropy"
CONFIGS = [
    # name, data, builder, out units, out act, loss, optimizer, epochs, batch
    ("digits relu adam", P.digits, cls([64, 32]), 10, "softmax", SCE, lambda: keras.optimizers.Adam(1e-3), 10, 32),
    ("digits relu adam bs128", P.digits, cls([64, 32]), 10, "softmax", SCE, lambda: keras.optimizers.Adam(3e-3), 10, 128),
    ("digits tanh adam", P.digits, cls([64], "tanh"), 10, "softmax", SCE, lambda: keras.optimizers.Adam(1e-3), 10, 32),
    ("digits relu sgd-mom", P.digits, cls([64]), 10, "softmax", SCE, lambda: keras.optimizers.SGD(0.05, momentum=0.9), 10, 32),
    ("digits relu rmsprop", P.digits, cls([64, 64]), 10, "softmax", SCE, lambda: keras.optimizers.RMSprop(1e-3), 10, 32),
    ("digits deep relu", P.digits, cls([64] * 5), 10, "softmax", SCE, lambda: keras.optimizers.Adam(1e-3), 10, 32),
    ("digits dropout 20ep", P.digits, cls([128, 128], extra=(keras.layers.Dropout(0.3),)), 10, "softmax", SCE,
     lambda: keras.optimizers.Adam(1e-3), 20, 32),
    ("digits sigmoid hidden", P.digits, cls([64], "sigmoid"), 10, "softmax", SCE, lambda: keras.optimizers.Adam(3e-3), 10, 32),
    ("moons tanh adam", P.moons, cls([32, 32], "tanh"), 1, "sigmoid", BCE, lambda: keras.optimizers.Adam(1e-2), 10, 32),
    ("moons relu adam", P.moons, cls([32, 32]), 1, "sigmoid", BCE, lambda: keras.optimizers.Adam(1e-2), 10, 32),
    ("cancer relu adam", cancer, cls([16]), 1, "sigmoid", BCE, lambda: keras.optimizers.Adam(1e-3), 15, 16),
    ("regression relu adam", P.regression, cls([32, 32]), 1, None, "mse", lambda: keras.optimizers.Adam(3e-3), 10, 32),
    ("regression linear sgd", P.regression, cls([]), 1, None, "mse", lambda: keras.optimizers.SGD(0.05), 10, 32),
]


def rolling_min(values, n):
    if len(values) < n:
        return np.array([])
    return np.min(np.lib.stride_tricks.sliding_window_view(values, n), axis=1)


def margins(s, th):
    """The statistics each rule thresholds, on one healthy run."""
    out = {}
    p = th.persistence
    dead = [rolling_min(v.values, p) for v in s.per_layer("dead_fraction").values()]
    out["dead_fraction"] = max((d.max() for d in dead if len(d)), default=np.nan)
    sat = {n: v for n, v in s.per_layer("saturated_fraction").items() if n != s.output_layer()}
    sat = [rolling_min(v.values, p) for v in sat.values()]
    out["saturated_fraction"] = max((d.max() for d in sat if len(d)), default=np.nan)
    growth = []
    for v in s.per_layer("grad_norm").values():
        base = np.median(v.values[: th.baseline_points])
        growth.append(rolling_min(v.values / base, p).max())
    out["grad_growth"] = max(growth, default=np.nan)
    layers = list(s.per_layer("grad_norm").values())
    if len(layers) >= 2:
        ratio = layers[0].values / np.maximum(layers[-1].values, 1e-12)
        out["first_last_ratio_min"] = rolling_min(ratio[::-1] * -1, p).max() * -1 if len(ratio) >= p else np.nan
    val = s.series("val/loss")
    if val is not None and len(val) > 1:
        best = int(np.argmin(val.values))
        out["val_rise_after_best"] = float(val.values[best:].max() / val.values[best] - 1)
    std = s.series("data/input_std")
    out["input_std"] = float(np.median(std.values)) if std is not None else np.nan
    return out


def _ol_judge(acc, threshold=0.03, rate=0.2):
    """AUTOTRAINER's oscillation test on accuracy (utils/monitor.py), as published."""
    maxima, minima = [], []
    for i in range(1, len(acc) - 1):
        if acc[i] - acc[i - 1] >= 0 and acc[i] - acc[i + 1] >= 0:
            maxima.append(acc[i])
        if acc[i] - acc[i - 1] <= 0 and acc[i] - acc[i + 1] <= 0:
            minima.append(acc[i])
    count = sum(1 for a, b in zip(maxima, minima, strict=False) if a - b >= threshold)
    return count >= rate * len(acc)


def published(s):
    """Which published rules, applied as published (one observation, every layer), fire."""
    fired = set()
    layers = list(s.per_layer("grad_norm").values())
    if len(layers) >= 2:
        first, last = layers[0].values, np.maximum(layers[-1].values, 1e-12)
        if np.any(first / last > 70):
            fired.add("AUTOTRAINER exploding (ratio > 70)")
        if np.any((first / last < 1e-3) & (first < 1e-4)):
            fired.add("AUTOTRAINER vanishing")
    if any(np.any(v.values >= 0.7) for v in s.per_layer("dead_fraction").values()):
        fired.add("DeepDiagnosis dead node (>= 70 %)")
    if any(np.any(v.values >= 0.7) for v in s.per_layer("zero_grad_fraction").values()):
        fired.add("AUTOTRAINER dying ReLU (zero grads >= 70 %)")
    if any(np.any(v.values > 0.5) for v in s.per_layer("saturated_fraction").values()):
        fired.add("DeepDiagnosis saturation (> 50 %, all layers)")
    acc = s.series("train/accuracy")
    if acc is not None and _ol_judge(acc.values):
        fired.add("AUTOTRAINER oscillation (accuracy)")
    val = s.series("val/accuracy")
    if (acc is not None and val is not None and len(acc) > 1
            and np.max(np.diff(acc.values)) < 0.01 and np.max(np.diff(val.values)) < 0.01):
        fired.add("AUTOTRAINER slow convergence (accuracy)")
    return fired


def main(seeds: int = 3) -> int:
    th = Thresholds()
    alarms, rows, naive = [], [], []
    start = time.perf_counter()
    for seed in range(seeds):
        for name, data, build, units, act, loss, opt, epochs, bs in CONFIGS:
            keras.utils.set_random_seed(seed)
            (x, y), val = data()
            model = build(x.shape[1], units, act)
            model.compile(optimizer=opt(), loss=loss, metrics=["accuracy"] if loss != "mse" else ["mae"])
            live = LiveDiagnosis(run=f"{name} #{seed}", scalars_every=2)
            model.fit(x, y, validation_data=val, epochs=epochs, batch_size=bs, verbose=0, callbacks=[live])
            bad = [f for f in live.findings if f.severity in ("warning", "error")]
            alarms += [(live.run, f.id, f.where, f.message) for f in bad]
            rows.append((live.run, margins(live.recorder.signals(), th), len(bad)))
            naive.append(published(live.recorder.signals()))
    print(f"{len(rows)} healthy runs in {time.perf_counter() - start:.0f}s, "
          f"{len(alarms)} false alarm(s)")
    for alarm in alarms:
        print("  FALSE ALARM", alarm)
    keys = sorted({k for _, m, _ in rows for k in m})
    print("statistic (worst healthy value over runs) vs threshold:")
    limits = {"dead_fraction": th.dead_fraction, "saturated_fraction": th.saturated_fraction,
              "grad_growth": th.explode_growth, "first_last_ratio_min": th.vanish_ratio,
              "val_rise_after_best": th.overfit_rise, "input_std": th.input_std_max}
    for key in keys:
        values = np.array([m.get(key, np.nan) for _, m, _ in rows], dtype=float)
        values = values[np.isfinite(values)]
        if not len(values):
            continue
        worst = values.min() if key == "first_last_ratio_min" else values.max()
        print(f"  {key:22s} worst {worst:10.4g}   threshold {limits.get(key, float('nan')):10.4g}")
    print("published rules applied as published, on the same healthy runs:")
    for rule in sorted(set().union(*naive)):
        print(f"  {rule:48s} fires on {sum(rule in n for n in naive)} of {len(naive)} runs")
    return 0 if not alarms else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
