"""Claim: a step the guard rejects takes no more memory than one it accepts (within 1.1x).

A rejected step does what an accepted one does, then counts the NaN/Inf
values of the tensors it failed on (for the violation's message) and
assigns the held state back. Each case runs in a process of its own: the
model is built and guarded, one `fit` of a clean batch traces the step and
runs it, then one `fit` of the case's batch: clean (`accepted`) or with one
row of NaN (`rejected`: every gradient and the updated state are then
not finite, and counted). Measured: the process's peak resident memory
(`VmHWM`) at the end minus its resident memory before the first `fit`, and
the time of the second `fit`. Printed: the medians and the ratio
rejected / accepted. The cases alternate, `--repeats` times each.

Models: the wide three-layer MLP (`scale_models.mlp_wide`) at 2.7 M
parameters (its state, weights and Adam's slots, ~31 MB: held by the
transaction at the default `hold_bytes`) and at 50 M (gated: its updates
are checked before they are written, only the rest of the state held), and
at 50 M held whole (`hold_bytes=2**40`: 600 MB held, every gradient and
variable counted on a rejected step).

Run: `.venv/bin/python benchmarks/rejected_step.py [--models mlp2_7m,mlp50m] [--repeats 3]`
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

MODELS = {"mlp2_7m": (2_700_000, None), "mlp50m": (50_000_000, None), "mlp50m_held": (50_000_000, 2**40)}
"""name -> (parameters, `hold_bytes`: `None` for the default)."""
BATCH = 64


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def child(name: str, case: str) -> None:
    """One case in this process: prints `growth_bytes seconds`."""
    import numpy as np

    import scale_models
    import tfguard

    params, hold_bytes = MODELS[name]
    model = scale_models.mlp_wide(params)
    width = model.input_shape[-1]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, width)).astype("float32")
    y = rng.integers(0, width, BATCH).astype("float32")
    second = x.copy()
    if case == "rejected":  # one row of NaN: the forward pass, the loss and every gradient are not finite
        second[3] = np.nan
    tfguard.guard(model, policy="skip", quarantine_dir=None,
                  **({} if hold_bytes is None else {"hold_bytes": hold_bytes}))
    before = _rss()
    model.fit(x, y, batch_size=BATCH, verbose=0)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        history = model.fit(second, y, batch_size=BATCH, verbose=0)
    seconds = time.perf_counter() - start
    assert history.history["guard_skipped"] == [1.0 if case == "rejected" else 0.0], history.history
    print(_peak() - before, seconds)


def run(name: str, case: str) -> tuple[int, float]:
    out = subprocess.run([sys.executable, __file__, "--child", name, case], capture_output=True, text=True,
                         check=True)
    growth, seconds = out.stdout.split()[-2:]
    return int(growth), float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))  # mlp2_7m,mlp50m,mlp50m_held
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    print(f"{'model':10s} {'accepted MB':>12s} {'rejected MB':>12s} {'ratio':>6s} {'accepted s':>11s} {'rejected s':>11s}")
    for name in args.models.split(","):
        results: dict[str, list] = {"accepted": [], "rejected": []}
        for _ in range(args.repeats):
            for case in results:
                results[case].append(run(name, case))
        (a, a_s), (r, r_s) = ((statistics.median(g for g, _ in results[c]) / 2**20,
                               statistics.median(s for _, s in results[c])) for c in ("accepted", "rejected"))
        print(f"{name:10s} {a:12.1f} {r:12.1f} {r / a:6.2f}x {a_s:11.3f} {r_s:11.3f}"
              f"   (accepted {[round(g / 2**20) for g, _ in results['accepted']]},"
              f" rejected {[round(g / 2**20) for g, _ in results['rejected']]} MB)")


if __name__ == "__main__":
    main()
