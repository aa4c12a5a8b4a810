"""Claim: the invariant checks cost nothing measurable: within the guard's and the Logger's targets.

The reference CNN of `logging_overhead.py` (batch 64, Adam, synthetic
images) trains in one process, contenders interleaved round-robin after a
warm-up so that machine noise hits all of them alike:

* `none`: plain `fit`;
* `guard`: `tfguard.guard(model)` (default checkpoints, no invariant check);
* `guard+invariants`: the same guarded model with a callback that drives
  the model's invariant watch as `Logger` and `LiveDiagnosis` do
  (`tfguard.invariants.watch(model)`: fingerprints at the fit's start, the
  structural checks after its first step, the variable and collapse checks
  at its end);
* `logger`: `tfguard.Logger(invariants=False)`, scalars every 10 steps,
  histograms every 100;
* `logger+invariants`: the default `tfguard.Logger()` (invariants on).

Every round is one `fit` of `--steps` steps (one epoch). The invariant
contenders forget their watch before every round (`invariants.forget`), so
each round pays every check, the one-time ones included, as a whole run of
`--steps` steps would: an upper bound on the cost of a longer run, which
pays the one-time checks once. Ratios are medians over rounds of the step
time divided by the `none` step time of the same round (paired), as in
`logging_overhead.py`; the invariants' own cost is also printed as the paired
ratio to the same contender without them.

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


class DriveInvariants(keras.callbacks.Callback):
    """What `Logger` and `LiveDiagnosis` do for the invariants, alone: start, epoch ends."""

    def __init__(self):
        super().__init__()
        self.records: list[dict] = []

    def on_train_begin(self, logs=None):
        watch = invariants.watch(self.model)
        watch.add_listener(self.records.append)
        watch.begin_fit()

    def on_epoch_end(self, epoch, logs=None):
        invariants.watch(self.model).end_epoch(epoch)


class Contender:
    def __init__(self, name: str, model, callbacks=(), fresh_checks: bool = False):
        self.name, self.model, self.callbacks = name, model, list(callbacks)
        self.fresh_checks = fresh_checks
        self.times: list[float] = []

    def round(self, x, y, steps: int, record: bool) -> None:
        if self.fresh_checks:
            invariants.forget(self.model)
        start = time.perf_counter()
        self.model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
                       callbacks=self.callbacks)
        if record:
            self.times.append((time.perf_counter() - start) / steps)


def paired(a: Contender, b: Contender) -> float:
    return statistics.median(t / u for t, u in zip(a.times, b.times))


def main(argv: list[str] | None = None) -> int:
    args, x, y = rounds_setup(__doc__, argv, rounds=12, steps=100)
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
                  [drive], fresh_checks=True),
        Contender("logger", reference_cnn(), [plain_logger]),
        Contender("logger+invariants", reference_cnn(), [checking_logger], fresh_checks=True),
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
    print(f"checks run each round: {', '.join(checks)}")
    for name, target in (("guard", GUARD_TARGET), ("logger", LOGGER_TARGET)):
        ratio = paired(by[f"{name}+invariants"], base)
        own = paired(by[f"{name}+invariants"], by[name])
        verdict = "OK" if ratio <= target else "ABOVE TARGET"
        print(f"{name}+invariants / none = {ratio:.3f} (target <= {target:.2f}): {verdict}; "
              f"invariants' own share: {name}+invariants / {name} = {own:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
