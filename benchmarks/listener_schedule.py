"""Claim: two listeners with periods 3 and 10 cost what their union costs, not every step.

Each listener subscribes with its own period (`tfguard.instrument(model)
.subscribe(fn, scalars_every=N)`); the host asks the listener bus once per
step whether anything is due, and runs the recording trace only then. With
periods 3 and 10 the recording steps are the union, 0, 3, 6, 9, 10, 12, ...:
24 of every 60 steps. (Merging the two requests into one period, their gcd
1, would record every step.)

Five contenders train the reference CNN of `logging_overhead.py` (28x28x1
-> Conv32 3x3 relu -> MaxPool -> Conv64 3x3 relu -> MaxPool -> Flatten ->
Dense128 relu -> Dropout(0.3) -> Dense10 softmax; batch 64; Adam), each its
own model with the same seed, on the same synthetic data:

* `none`: no listener (the model is not instrumented);
* `every-3`: one listener, `scalars_every=3`;
* `every-10`: one listener, `scalars_every=10`;
* `3-and-10`: two listeners on one model, every 3 and every 10;
* `every-step`: one listener, `scalars_every=1`.

Every listener counts the records it gets and the steps they are for, so
the recording steps of each round are counted, not assumed. A round is one
`fit` of `--steps` steps per contender (default 60, a multiple of 30, so
every round holds the same schedule), contenders interleaved with the order
rotated every round, after `--warmup` rounds that trace both the plain and
the recording step. The ratio of a contender is the median over rounds of
its step time divided by the step time of `none` in the same round
(paired, as in `logging_overhead.py`). The last column is what the ratio
would be if the cost of recording were proportional to the recording
steps: `1 + (every-step - 1) x recording steps / steps`.

TensorFlow runs on one thread (`--threads 1`), as in `logging_overhead.py`:
on a shared 2-core machine the other core absorbs the noise of other
processes.

This is a benchmark, not a test: it prints, and asserts nothing.

Run: `.venv/bin/python benchmarks/listener_schedule.py` (about 3 minutes on
2 cores; `--rounds`, `--steps`, `--warmup` to change).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

import tfguard  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from logging_overhead import BATCH, reference_cnn, rounds_setup  # noqa: E402  (the same CNN)


class Counter:
    """A listener that counts its records and remembers the steps they are for."""

    def __init__(self):
        self.records = 0
        self.starts: set[int] = set()

    def __call__(self, record) -> None:
        self.records += 1
        self.starts.add(record.start)


class Contender:
    """One model, its listeners (one per period), and its step time per round."""

    def __init__(self, name: str, periods: tuple[int, ...]):
        keras.utils.set_random_seed(0)
        self.name = name
        self.periods = periods
        self.model = reference_cnn()
        self.listeners = [Counter() for _ in periods]
        if periods:
            inst = tfguard.instrument(self.model)
            for listener, every in zip(self.listeners, periods, strict=True):
                inst.subscribe(listener, scalars_every=every)
        self.times: list[float] = []
        self.recording_steps: list[int] = []
        self.records: list[int] = []

    def round(self, x, y, steps: int, measured: bool) -> None:
        before = [set(listener.starts) for listener in self.listeners]
        records_before = sum(listener.records for listener in self.listeners)
        start = time.perf_counter()
        self.model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
        elapsed = time.perf_counter() - start
        if measured:
            self.times.append(elapsed / steps)
            new = set().union(*(lis.starts - b for lis, b in zip(self.listeners, before, strict=True)))
            self.recording_steps.append(len(new))
            self.records.append(sum(lis.records for lis in self.listeners) - records_before)


def main(argv: list[str] | None = None) -> int:
    args, x, y = rounds_setup(__doc__, argv, rounds=9, steps=60)
    contenders = [
        Contender("none", ()),
        Contender("every-3", (3,)),
        Contender("every-10", (10,)),
        Contender("3-and-10", (3, 10)),
        Contender("every-step", (1,)),
    ]
    began = time.perf_counter()
    for index in range(args.warmup + args.rounds):
        shift = index % len(contenders)
        for contender in contenders[shift:] + contenders[:shift]:
            contender.round(x, y, args.steps, measured=index >= args.warmup)

    base = contenders[0].times
    ratios = {
        c.name: statistics.median(t / b for t, b in zip(c.times, base, strict=True))
        for c in contenders
    }
    every_step = ratios["every-step"] - 1.0
    threads = args.threads or "default"
    print(f"reference CNN, batch {BATCH}, {args.steps} steps x {args.rounds} rounds "
          f"(+{args.warmup} warm-up), interleaved, TensorFlow threads: {threads}, "
          f"{time.perf_counter() - began:.0f} s")
    print("ratio = median over rounds of (contender step time / `none` step time in the same round)")
    print(f"  {'contender':<12}{'periods':>9}{'ms/step':>10}{'ratio':>8}"
          f"{'recording steps':>17}{'records':>9}{'if cost ~ recording steps':>27}")
    for c in contenders:
        recording = statistics.median(c.recording_steps) if c.recording_steps else 0
        records = statistics.median(c.records) if c.records else 0
        expected = 1.0 + every_step * recording / args.steps
        periods = ",".join(map(str, c.periods)) or "-"
        print(f"  {c.name:<12}{periods:>9}{statistics.median(c.times) * 1000:10.2f}"
              f"{ratios[c.name]:8.3f}{f'{recording:g}/{args.steps}':>17}{records:9g}"
              f"{expected:27.3f}")
    union = ratios["3-and-10"] - 1.0
    parts = (ratios["every-3"] - 1.0) + (ratios["every-10"] - 1.0)
    print(f"extra cost of 3-and-10: {union * 100:.1f} % of a plain step; every-3 + every-10 "
          f"apart: {parts * 100:.1f} %; every step: {every_step * 100:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
