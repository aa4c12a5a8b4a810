"""Claim: the spike stage costs at most 2% over `guard()` without it. Step time of the reference CNN, interleaved.

Contenders, on the same data in one process, round-robin after a warm-up
(the reference CNN and the interleaving of `guard_overhead.py`): plain
Keras `fit`; `tfguard.guard(model)` (the default firewall); and
`tfguard.guard(model, spikes=True)` (the same, with the loss and the
global gradient norm compared with the last 128 accepted steps in the
graph). With `--jit`, each model is compiled with XLA. Prints the median
step time and the ratio of the spike stage against `guard()` without it,
round by round.

Run: `.venv/bin/python benchmarks/spike_overhead.py [--rounds 15 --steps 25 --jit]`
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfguard  # noqa: E402
from guard_overhead import Contender, dataset, reference_cnn  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--jit", action="store_true", help="compile every model with XLA")
    parser.add_argument("--threads", type=int, default=1,
                        help="TensorFlow intra/inter-op threads (1: stable figures on a shared 2-core box; 0: default)")
    args = parser.parse_args(argv)
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    quarantine = tempfile.mkdtemp(prefix="tfguard-bench-")

    def model():
        built = reference_cnn()
        built.jit_compile = args.jit
        return built

    plain = Contender("plain fit", model())
    guarded = Contender("guard()", tfguard.guard(model(), quarantine_dir=quarantine))
    spiky = Contender("guard(spikes=True)", tfguard.guard(model(), spikes=True, quarantine_dir=quarantine),
                      base=guarded)
    contenders = [plain, guarded, spiky]
    ds = dataset(args.batch)
    for contender in contenders:
        contender.prepare(ds)
    for _ in range(args.rounds):
        for contender in contenders:
            contender.run(args.steps)
    device = "GPU" if tf.config.list_physical_devices("GPU") else "CPU"
    print(f"spike overhead: reference CNN, batch {args.batch}, {args.rounds} rounds x {args.steps} steps, "
          f"{'XLA' if args.jit else 'graph'}, {device}, {args.threads or 'default'} TF thread(s), "
          f"TF {tf.__version__}, Keras {keras.__version__}")
    print("ratio = median over rounds of (contender step time / its base's step time in the same round);"
          " the base of guard(spikes=True) is guard()")
    print(f"{'contender':24s} {'median ms/step':>15s} {'ratio vs base':>15s}")
    for contender in contenders:
        median = statistics.median(contender.times)
        base = (contender.base or plain).times
        ratio = statistics.median(t / b for t, b in zip(contender.times, base))
        print(f"{contender.name:24s} {median * 1000:15.2f} {ratio:14.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
