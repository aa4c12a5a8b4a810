"""Claim: attaching to a hand-written loop costs little per step, and nothing to a loop not attached.

The loop of keras-io's "Writing a training loop from scratch": a Dense
network on 784 pixels, `Adam`, a `SparseCategoricalCrossentropy` loss
object, a `SparseCategoricalAccuracy` metric updated by hand, a
`GradientTape` step. Contenders, on the same batches in one process,
round-robin after a warm-up:

* the step in a `tf.function`, traced before any session (plain), against
  the same step traced inside an open attach session (`tfguard run`'s:
  the firewall's gate and the loop recorder, which records each of the
  first 20 steps, then every 10th), and inside a session without the
  firewall (`guard=False`: the recorder alone). The plain step is called
  while the session is open too: a loop traced outside a session has no
  tfguard op, and runs as before;
* the step run eagerly, plain (no session) against attached, with and
  without the firewall (a session opened around each round, and its
  first two steps, where it finds the loop's model, outside the timing).

Prints the median step time of each and its ratio to plain.

Run: `.venv/bin/python benchmarks/loop_overhead.py [--rounds 6 --steps 60 --batch 64]`
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfguard.attach import attached  # noqa: E402


class GuideLoop:
    """The guide's model, optimizer, loss and metric, and its step (traced or eager)."""

    def __init__(self):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((784,), name="digits")
        h = keras.layers.Dense(64, activation="relu")(inputs)
        h = keras.layers.Dense(64, activation="relu")(h)
        outputs = keras.layers.Dense(10, name="predictions")(h)
        self.model = keras.Model(inputs, outputs, name="guide")
        self.optimizer = keras.optimizers.Adam(1e-3)
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.metric = keras.metrics.SparseCategoricalAccuracy()

    def step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = self.loss_fn(y, logits)
        grads = tape.gradient(loss, self.model.trainable_weights)
        self.optimizer.apply(grads, self.model.trainable_weights)
        self.metric.update_state(y, logits)
        return loss


def _time(step, batches, steps: int) -> float:
    start = time.perf_counter()
    for i in range(steps):
        x, y = batches[i % len(batches)]
        step(x, y)
    return (time.perf_counter() - start) / steps


def traced(args, batches, logdir: str, guard: bool) -> tuple[float, float]:
    """Median step time of the plain and the attached tf.function step, interleaved in one open session."""
    loop = GuideLoop()
    plain = tf.function(loop.step)
    plain(*batches[0])  # traced outside any session
    with attached(logdir=logdir, guard=guard):
        inside = tf.function(loop.step)
        inside(*batches[0])  # traced inside: the recorder's ops are in this trace
        for step in (plain, inside):
            _time(step, batches, args.steps)  # warm-up
        times = {"plain": [], "attached": []}
        for _ in range(args.rounds):
            times["plain"].append(_time(plain, batches, args.steps))
            times["attached"].append(_time(inside, batches, args.steps))
    return statistics.median(times["plain"]), statistics.median(times["attached"])


def eager(args, batches, logdir: str, guard: bool) -> tuple[float, float]:
    """Median step time of the eager step, plain and with a session opened around each round."""
    loop = GuideLoop()
    _time(loop.step, batches, 25)  # past the recorder's dense first steps in every later session
    times = {"plain": [], "attached": []}
    steps = max(10, args.steps // 3)
    for _ in range(args.rounds):
        times["plain"].append(_time(loop.step, batches, steps))
        with attached(logdir=logdir, guard=guard):
            _time(loop.step, batches, 2)  # the session's first update finds the model (once per run)
            times["attached"].append(_time(loop.step, batches, steps))
    return statistics.median(times["plain"]), statistics.median(times["attached"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    batches = [(tf.constant(rng.integers(0, 256, (args.batch, 784)).astype("float32")),
                tf.constant(rng.integers(0, 10, args.batch))) for _ in range(8)]
    with tempfile.TemporaryDirectory() as logdir:
        rows = []
        plain, inside = traced(args, batches, os.path.join(logdir, "guarded"), guard=True)
        rows.append(("tf.function, attached (gate + recorder)", plain, inside))
        plain, inside = traced(args, batches, os.path.join(logdir, "recorder"), guard=False)
        rows.append(("tf.function, attached --no-guard (recorder)", plain, inside))
        plain, inside = eager(args, batches, os.path.join(logdir, "eager"), guard=True)
        rows.append(("eager, attached (gate + recorder)", plain, inside))
        plain, inside = eager(args, batches, os.path.join(logdir, "eager-recorder"), guard=False)
        rows.append(("eager, attached --no-guard (recorder)", plain, inside))
    print(f"{tf.config.list_logical_devices()[-1].device_type}, batch {args.batch}, "
          f"{args.rounds} rounds of {args.steps} steps, median step time")
    print(f"{'loop':46s} {'plain ms':>9s} {'attached ms':>12s} {'ratio':>6s}")
    for name, plain, inside in rows:
        print(f"{name:46s} {1e3 * plain:9.3f} {1e3 * inside:12.3f} {inside / plain:6.2f}")


if __name__ == "__main__":
    main()
