"""Claim: the input wait of every recording step is measured for at most 1 % of step time, and tells slow pipelines apart.

Two parts, one process, TensorFlow on one thread (`--threads 1`, as in
`logging_overhead.py`):

1. The pair of issue 16. The same small model (16 -> Dense 256 relu ->
   Dense 4 softmax, Adam, batch 16) trains 2 epochs under `LiveDiagnosis`
   (every 2 steps) fed by a slow pipeline (a `py_function` that sleeps
   4 ms per element, no prefetch) and by the fixed one (`cache()` and
   `prefetch(AUTOTUNE)`). Printed: the median `perf/input_wait_fraction` of
   each and whether `input_bound` fires, with the stage it names.
2. The price of the measurement. A recording step hands back a timestamp
   taken once its batch was there and the host waits for the step's outputs
   to time the whole step (`tfguard._firewall.host.HostLoop.measure_input_wait`);
   without the measurement the host does not wait.
   The reference CNN of `logging_overhead.py` trains rounds of `--steps`
   steps with a listener on every step (the worst case: every step records),
   measurement on and off in two model instances, interleaved, order
   rotated; ratio = median over rounds of (on / off) step time, paired.

This is a benchmark, not a test: it prints, and asserts nothing.

Run: `.venv/bin/python benchmarks/input_wait.py` (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfguard import _tags  # noqa: E402
from tfguard._firewall import instrument  # noqa: E402
from tfguard._firewall.host import HostLoop  # noqa: E402
from tfguard.diagnose import LiveDiagnosis, diagnose  # noqa: E402
from tfguard.lint import lint_dataset  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from logging_overhead import BATCH, reference_cnn, rounds_setup  # noqa: E402

TARGET = 1.01


def slow_decode(x):
    time.sleep(0.004)  # a decoder written in Python, element by element
    return x


def pipelines():
    rng = np.random.default_rng(0)
    x, y = rng.random((256, 16), dtype=np.float32), (np.arange(256) % 4).astype("int64")
    base = tf.data.Dataset.from_tensor_slices((x, y))
    slow = base.map(lambda a, b: (tf.py_function(slow_decode, [a], tf.float32), b)).map(
        lambda a, b: (tf.ensure_shape(a, [16]), b)).batch(16)
    fast = base.cache().batch(16).prefetch(tf.data.AUTOTUNE)
    return {"slow (py_function, no prefetch)": slow, "fixed (cache, prefetch)": fast}


def pair() -> None:
    print(f"{'pipeline':<34}{'median wait':>12}{'input_bound':>13}  stage named")
    for name, ds in pipelines().items():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(256, activation="relu"),
                                  keras.layers.Dense(4, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        live = LiveDiagnosis(scalars_every=2, lint=lint_dataset(ds))
        model.fit(ds, epochs=2, verbose=0, callbacks=[live])
        wait = live.recorder.signals().series(_tags.INPUT_WAIT_FRACTION)
        found = diagnose(live.recorder.signals()).by_id("input_bound")
        stage = found[0].where if found else "-"
        print(f"{name:<34}{np.median(wait.values):12.3f}{('yes' if found else 'no'):>13}  {stage}")


class Contender:
    def __init__(self, name: str, measure: bool):
        keras.utils.set_random_seed(0)
        self.name, self.measure = name, measure
        self.model = reference_cnn()
        instrument(self.model).subscribe(lambda record: None, scalars_every=1, weights=True)
        self.times: list[float] = []

    def round(self, x, y, steps: int, record: bool) -> None:
        HostLoop.measure_input_wait = self.measure
        start = time.perf_counter()
        self.model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
        elapsed = time.perf_counter() - start
        if record:
            self.times.append(elapsed / steps)


def price(args, x, y) -> None:
    contenders = [Contender("measured (timestamp, waited)", True), Contender("not measured", False)]
    for round_ in range(args.warmup + args.rounds):
        order = contenders if round_ % 2 == 0 else contenders[::-1]
        for contender in order:
            contender.round(x, y, args.steps, record=round_ >= args.warmup)
    HostLoop.measure_input_wait = True
    on, off = contenders
    ratios = [a / b for a, b in zip(on.times, off.times, strict=True)]
    print(f"\nevery step records; {args.rounds} rounds of {args.steps} steps, batch {BATCH}")
    for contender in contenders:
        print(f"  {contender.name:<28}{1000 * statistics.median(contender.times):8.2f} ms/step")
    print(f"  ratio measured / not measured (median of paired rounds): {statistics.median(ratios):.3f} "
          f"(target <= {TARGET})")


def main(argv: list[str] | None = None) -> int:
    args, x, y = rounds_setup(__doc__, argv, rounds=9, steps=40)
    pair()
    price(args, x, y)
    return 0


if __name__ == "__main__":
    sys.exit(main())
