"""Claim: `tfguard.Logger` costs at most 5 % of the training step time.

Three contenders train the reference CNN (28x28x1 -> Conv32 3x3 relu ->
MaxPool -> Conv64 3x3 relu -> MaxPool -> Flatten -> Dense128 relu ->
Dropout(0.3) -> Dense10 softmax; batch 64; Adam) on synthetic data, in one
process, interleaved round-robin after a warm-up so that machine noise hits
all of them alike:

* `none`: no logging;
* `keras-tensorboard`: `keras.callbacks.TensorBoard(histogram_freq=1)`;
* `tfguard-logger`: `tfguard.Logger` with scalars every 10 steps and all
  histograms (weights, gradients, activations) every 100 steps;
* `instrumented-only` (for attribution, not a logger): the firewall's
  instrumented step with the same requests (`tfguard.instrument(model)
  .subscribe(...)`) and a listener that does nothing: what the signals cost in
  the step itself, before the logger writes anything.

Each round is one `fit` of `--steps` steps per contender (one epoch, so the
epoch-end work of both loggers is included); the step time of a round is its
wall time divided by its steps. The default 100 steps are one histogram
period: every round of the tfguard logger holds exactly 10 scalar
recordings and 1 histogram recording, as a long run does on average. The
ratio of a contender is the median over rounds of its step time divided by
the step time of `none` in the same round (paired: a slow spell of the
machine hits both sides of a pair), as in `guard_overhead.py`; the median
step times are printed beside it.

TensorFlow runs on one thread by default (`--threads 1`): on a shared
2-core machine a second process takes one core now and then, which makes
whole rounds of a 2-thread TensorFlow about 1.8x slower at random and buries
a 5 % effect; with one thread the other core absorbs that noise.

Run: `.venv/bin/python benchmarks/logging_overhead.py` (about 2-3 minutes
on 2 cores; `--rounds`, `--steps` to change).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfguard.summary  # noqa: E402
from tfguard._firewall import instrument  # noqa: E402

TARGET = 1.05
BATCH = 64


def reference_cnn() -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(10, activation="softmax"),
        ],
        name="reference_cnn",
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


class Contender:
    def __init__(self, name: str, make_callbacks, root: str, instrumented: bool = False):
        keras.utils.set_random_seed(0)
        self.name = name
        self.model = reference_cnn()
        if instrumented:
            instrument(self.model).subscribe(
                lambda record: None, scalars_every=10, histograms_every=100, weights=True,
                histogram_kinds=("activations", "gradients", "weights"))
        self.make_callbacks = make_callbacks
        self.root = root
        self.times: list[float] = []

    def round(self, x, y, steps: int, record: bool) -> None:
        callbacks = self.make_callbacks(self.root)
        start = time.perf_counter()
        self.model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=callbacks)
        elapsed = time.perf_counter() - start
        if record:
            self.times.append(elapsed / steps)


def rounds_setup(doc: str, argv, *, rounds: int, steps: int):
    """The arguments of a rounds benchmark, TensorFlow's threads set, and `(args, x, y)` of synthetic images."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=rounds, help="measured rounds per contender")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured rounds per contender")
    parser.add_argument("--steps", type=int, default=steps, help="training steps per round")
    parser.add_argument("--threads", type=int, default=1,
                        help="TensorFlow intra/inter-op threads (0 = TensorFlow's default)")
    args = parser.parse_args(argv)
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    rng = np.random.default_rng(0)
    x = rng.random((args.steps * BATCH, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, args.steps * BATCH)
    return args, x, y


def main(argv: list[str] | None = None) -> int:
    args, x, y = rounds_setup(__doc__, argv, rounds=15, steps=100)
    root = tempfile.mkdtemp(prefix="tfguard-bench-")
    # One Logger per contender for the whole benchmark (one run, several fits),
    # as a user would keep one callback for a training run.
    logger = tfguard.summary.Logger(
        os.path.join(root, "tfguard"), {"bench": "overhead"}, scalars_every=10, histograms_every=100
    )
    keras_tb = keras.callbacks.TensorBoard(os.path.join(root, "keras"), histogram_freq=1)
    contenders = [
        Contender("none", lambda _root: [], root),
        Contender("keras-tensorboard", lambda _root: [keras_tb], root),
        Contender("tfguard-logger", lambda _root: [logger], root),
        Contender("instrumented-only", lambda _root: [], root, instrumented=True),
    ]
    for index in range(args.warmup + args.rounds):
        shift = index % len(contenders)
        order = contenders[shift:] + contenders[:shift]
        for contender in order:
            contender.round(x, y, args.steps, record=index >= args.warmup)

    base = contenders[0].times
    threads = args.threads or "default"
    print(f"reference CNN, batch {BATCH}, {args.steps} steps x {args.rounds} rounds (+{args.warmup} warm-up), "
          f"interleaved, TensorFlow threads: {threads}")
    print("ratio = median over rounds of (contender step time / `none` step time in the same round)")
    ratios = {}
    for contender in contenders:
        median = statistics.median(contender.times)
        ratios[contender.name] = statistics.median(t / b for t, b in zip(contender.times, base))
        print(f"  {contender.name:<18} {median * 1000:8.2f} ms/step (median)   ratio {ratios[contender.name]:5.3f}")
    ratio = ratios["tfguard-logger"]
    verdict = "OK" if ratio <= TARGET else "ABOVE TARGET"
    print(f"tfguard-logger / none = {ratio:.3f} (target <= {TARGET:.2f}): {verdict}")
    own = statistics.median(a / b for a, b in zip(contenders[2].times, contenders[3].times))
    print(f"tfguard-logger / instrumented-only = {own:.3f} (the logger's own work on top of the signal step)")
    print(f"logs in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
