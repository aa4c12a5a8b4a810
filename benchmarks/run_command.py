"""Claim: `tfguard run` costs a user at most 1.15x plain `python` on a one-fit script, 1.5x on many fits.

What attaching costs, measured as a user meets it: whole processes, start-up
and imports included, on two short scripts shaped like the ones users run
(written to a temporary folder; data: scikit-learn's shipped digits):

- one fit: a small convnet (Conv 16 -> Conv 32 -> Dense 64 -> softmax) on
  the 1,797 8x8 digits, 8 epochs, batch 32, a validation split;
- many fits: a Keras-guide-shaped script with 21 small `fit` calls (7
  models, each fitted 3 times for 1 epoch, as guides do between prints).

Contenders, each a fresh process, interleaved with the order rotated every
round: `python SCRIPT` and `tfguard run --logdir TMP SCRIPT` (guard, logger,
live diagnosis, the report). Time: wall clock from start to exit, median of
`--repeats` rounds (default 3), the ratio of the medians and, beside it,
the median of each round's own ratio (`paired`: the two runs of a round
meet the same machine load, so it moves less when the load drifts); peak RSS by
`/usr/bin/time`. Both are also checked once for TensorFlow's start-up banner
on stderr: `tfguard run` must print it no more often than `python` does.

Targets (issue 12): one fit <= 1.15x, many fits <= 1.5x.

Run: `.venv/bin/python benchmarks/run_command.py [--repeats 3]` (about 6
minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from diagnose_command import tfguard_command, timed  # noqa: E402

TARGETS = {"one fit": 1.15, "many fits": 1.5}
BANNER = (b"cudart_stub", b"absl::InitializeLog", b"oneDNN custom operations", b"cuInit")

_DATA = """
import keras
import numpy as np
from sklearn.datasets import load_digits

x, y = load_digits(return_X_y=True)
x = (x / 16.0).reshape(-1, 8, 8, 1).astype("float32")
"""

ONE_FIT = _DATA + """
keras.utils.set_random_seed(0)
model = keras.Sequential([
    keras.Input((8, 8, 1)),
    keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
    keras.layers.Conv2D(32, 3, activation="relu"),
    keras.layers.Flatten(),
    keras.layers.Dense(64, activation="relu"),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
history = model.fit(x, y, epochs=8, batch_size=32, validation_split=0.2, verbose=0)
print("val_accuracy", round(history.history["val_accuracy"][-1], 3))
"""

MANY_FITS = _DATA + """
x = x.reshape(len(x), -1)
for units in (16, 32, 48, 64, 96, 128, 192):
    keras.utils.set_random_seed(units)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(units, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    for _ in range(3):
        history = model.fit(x, y, epochs=1, batch_size=64, verbose=0)
    print(units, "accuracy", round(history.history["accuracy"][-1], 3))
"""


def banner_lines(stderr: bytes) -> int:
    """Lines of TensorFlow's start-up banner in a process's stderr."""
    return sum(any(mark in line for mark in BANNER) for line in stderr.splitlines())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    args = parser.parse_args(argv)
    env_before = os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)  # a user's shell: banner on
    folder = tempfile.mkdtemp(prefix="tfguard-run-bench-")
    rows = []
    try:
        for label, source in (("one fit", ONE_FIT), ("many fits", MANY_FITS)):
            script = os.path.join(folder, label.replace(" ", "_") + ".py")
            with open(script, "w") as handle:
                handle.write(source)
            logdir = os.path.join(folder, "runs")
            commands = {
                "python": [sys.executable, script],
                "tfguard run": [*tfguard_command(), "run", "--logdir", logdir, script],
            }
            banners = {}
            for name, command in commands.items():  # once, for the banner and the exit status
                _, _, code, out, err = timed(command, capture=True)
                banners[name] = banner_lines(err)
                print(f"{label}: {name} exit {code}, banner lines {banners[name]}, "
                      f"says {out.decode(errors='replace').split()[-2:]}", flush=True)
            times: dict[str, list[float]] = {name: [] for name in commands}
            peaks: dict[str, list[float]] = {name: [] for name in commands}
            names = list(commands)
            for round_ in range(max(1, args.repeats)):
                for name in names[round_ % 2:] + names[: round_ % 2]:
                    shutil.rmtree(logdir, ignore_errors=True)
                    wall, peak, _code, _, _ = timed(commands[name])
                    times[name].append(wall)
                    peaks[name].append(peak)
                    print(f"  {label} round {round_ + 1}: {name:<12}{wall:7.2f} s {peak:6.0f} MB",
                          flush=True)
            plain, attached = statistics.median(times["python"]), statistics.median(times["tfguard run"])
            paired = statistics.median(a / p for a, p in zip(times["tfguard run"], times["python"]))
            rows.append((label, plain, attached, paired, max(peaks["python"]), max(peaks["tfguard run"]),
                         banners["python"], banners["tfguard run"]))
    finally:
        if env_before is not None:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = env_before
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\n{'script':<11}{'python s':>9}{'tfguard run s':>14}{'ratio':>7}{'paired':>8}{'target':>8}"
          f"{'peak MB (py/run)':>18}{'banner lines (py/run)':>23}")
    for label, plain, attached, paired, peak_plain, peak_run, banner_plain, banner_run in rows:
        print(f"{label:<11}{plain:9.2f}{attached:14.2f}{attached / plain:6.2f}x{paired:7.2f}x"
              f"{TARGETS[label]:7.2f}x{peak_plain:9.0f} / {peak_run:<6.0f}{banner_plain:12d} / {banner_run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
