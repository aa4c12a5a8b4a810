"""Claim: the invariant checks cost nothing measurable: within the guard's and the Logger's targets.

The reference CNN of `logging_overhead.py` (batch 64, Adam, synthetic
images whose label is the brightest of ten pixels, so the run is a healthy
one: on random labels the CNN may rightly end up predicting the prior for
every input, a collapsed output) trains in one process, contenders interleaved round-robin after a
warm-up so that machine noise hits all of them alike:

* `none`: plain `fit`;
* `guard`: `tfguard.guard(model)` (default stages, no invariant check);
* `guard+invariants`: the same guarded model with a callback that drives
  the model's invariant watch as `Logger` and `LiveDiagnosis` do
  (`tfguard.invariants.watch(model)`);
* `logger`: `tfguard.Logger(invariants=False)`, scalars every 10 steps,
  histograms every 100;
* `logger+invariants`: the default `tfguard.Logger()` (invariants on).

Every round is one `fit` of `--steps` steps (one epoch) and the rounds of a
contender are the epochs of one run, as in `logging_overhead.py`: the
one-time checks (fingerprints at the first fit's start, the structural
checks after its first step, the variable check at its first epoch end)
fall in the warm-up, and every measured round pays what every epoch of a
long run pays (the collapse check: one inference pass on 32 examples).
Ratios are medians over rounds of the step time divided by the `none` step
time of the same round (paired); the invariants' own cost is also printed as
the paired ratio to the same contender without them, and, free of the
machine's noise, as the share of a round spent inside the checks
(`InvariantWatch.seconds`, the host time of every moment of the watch).

The one-time cost is then measured on its own, on fresh models: the
seconds of `begin_fit`, the checks after the first step and the first epoch
end (median of `--once` repeats), also in reference-CNN steps.

Run: `.venv/bin/python benchmarks/invariants_overhead.py` (about 3-4 minutes
on 2 cores; `--rounds`, `--steps` to change).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402

import tfguard  # noqa: E402
from logging_overhead import BATCH, reference_cnn, rounds_setup  # noqa: E402
from tfguard import invariants  # noqa: E402

GUARD_TARGET = 1.03
LOGGER_TARGET = 1.05
ONCE = 5  # fresh models whose one-time checks are timed


class DriveInvariants(keras.callbacks.Callback):
    """What `Logger` and `LiveDiagnosis` do for the invariants, alone: start, epoch ends."""

    def __init__(self):
        super().__init__()
        self.records: list[dict] = []
        self.epochs = 0  # fits of one run continue its epochs, as the Logger counts them

    def on_train_begin(self, logs=None):
        watch = invariants.watch(self.model)
        watch.add_listener(self.records.append)
        watch.begin_fit(self.epochs)

    def on_epoch_end(self, epoch, logs=None):
        invariants.watch(self.model).end_epoch(self.epochs)
        self.epochs += 1


def one_time_cost(x, y, repeats: int) -> float:
    """Median seconds of the one-time checks on a fresh guarded reference CNN (after one fit step)."""
    seconds = []
    for _ in range(repeats):
        model = tfguard.guard(reference_cnn(), quarantine_dir=tempfile.mkdtemp())
        model.fit(x[:BATCH], y[:BATCH], batch_size=BATCH, epochs=1, verbose=0)  # traced, as in a run
        watch = invariants.watch(model)
        batch = (x[:BATCH], y[:BATCH], None)
        start = time.perf_counter()
        watch.begin_fit()
        watch.on_batch(batch)
        watch.end_epoch(0)
        seconds.append(time.perf_counter() - start)
        invariants.forget(model)
    return statistics.median(seconds)


class Contender:
    def __init__(self, name: str, model, callbacks=()):
        self.name, self.model, self.callbacks = name, model, list(callbacks)
        self.times: list[float] = []
        self.shares: list[float] = []  # of a round's time, spent inside the invariant checks

    def round(self, x, y, steps: int, record: bool) -> None:
        watch = invariants.watch_of(self.model)
        spent = watch.seconds if watch is not None else 0.0
        start = time.perf_counter()
        self.model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
                       callbacks=self.callbacks)
        elapsed = time.perf_counter() - start
        watch = invariants.watch_of(self.model)
        if record:
            self.times.append(elapsed / steps)
            if watch is not None:
                self.shares.append((watch.seconds - spent) / elapsed)


def paired(a: Contender, b: Contender) -> float:
    return statistics.median(t / u for t, u in zip(a.times, b.times))


def main(argv: list[str] | None = None) -> int:
    args, x, _ = rounds_setup(__doc__, argv, rounds=12, steps=100)
    y = x[:, 0, :10, 0].argmax(axis=1)  # learnable labels: a healthy run (random ones collapse to the prior)
    args.once = ONCE
    root = tempfile.mkdtemp(prefix="tfguard-invariants-")
    quarantine = os.path.join(root, "quarantine")
    drive = DriveInvariants()
    plain_logger = tfguard.Logger(os.path.join(root, "plain"), scalars_every=10, histograms_every=100,
                                  invariants=False)
    checking_logger = tfguard.Logger(os.path.join(root, "checking"), scalars_every=10,
                                     histograms_every=100)
    contenders = [
        Contender("none", reference_cnn()),
        Contender("guard", tfguard.guard(reference_cnn(), quarantine_dir=quarantine)),
        Contender("guard+invariants", tfguard.guard(reference_cnn(), quarantine_dir=quarantine),
                  [drive]),
        Contender("logger", reference_cnn(), [plain_logger]),
        Contender("logger+invariants", reference_cnn(), [checking_logger]),
    ]
    for index in range(args.warmup + args.rounds):
        shift = index % len(contenders)
        for contender in contenders[shift:] + contenders[:shift]:
            contender.round(x, y, args.steps, record=index >= args.warmup)

    base = contenders[0]
    print(f"reference CNN, batch {BATCH}, {args.steps} steps x {args.rounds} rounds "
          f"(+{args.warmup} warm-up), interleaved, TensorFlow threads: {args.threads or 'default'}")
    print("ratio = median over rounds of (contender step time / `none` step time in the same round)")
    for contender in contenders:
        median = statistics.median(contender.times)
        print(f"  {contender.name:<18} {median * 1000:8.2f} ms/step (median)   "
              f"ratio {paired(contender, base):5.3f}")
    by = {c.name: c for c in contenders}
    checks = sorted({r["check"] for r in drive.records})
    print(f"checks run (all in the warm-up, then collapsed_output every epoch): {', '.join(checks)}")
    for name, target in (("guard", GUARD_TARGET), ("logger", LOGGER_TARGET)):
        ratio = paired(by[f"{name}+invariants"], base)
        own = paired(by[f"{name}+invariants"], by[name])
        verdict = "OK" if ratio <= target else "ABOVE TARGET"
        share = statistics.median(by[f"{name}+invariants"].shares)
        print(f"{name}+invariants / none = {ratio:.3f} (target <= {target:.2f}): {verdict}; "
              f"invariants' own share: paired {name}+invariants / {name} = {own:.3f}, "
              f"timed inside the checks = {share * 100:.2f}% of a round")
    for name in ("guard+invariants", "logger+invariants"):
        watch = invariants.watch_of(by[name].model)
        failed = [(r["check"], r["where"], r["epoch"], r["evidence"]) for r in watch.records
                  if not r["ok"]]
        print(f"{name}: failed checks on the reference CNN: {failed or 'none'}"
              f"{'; could not run: ' + '; '.join(watch.errors) if watch.errors else ''}")
    once = one_time_cost(x, y, args.once)
    step = statistics.median(base.times)
    print(f"one-time checks (start, after step 1, first epoch end): {once:.3f} s = "
          f"{once / step:.0f} steps of plain fit, once per run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
