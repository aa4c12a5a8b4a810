"""Claim: what is left of the guard on a deep, small model is work per variable, not per value.

A guarded step of a small model (its state at most `hold_bytes`) holds every
variable and optimizer slot before the step (one stack per shape,
`Transaction.hold(stack=True)`), checks every one after it
(`stats.Reducer.all_finite`: the reads added per shape with `tf.add_n`) and
hands each to the restore's branch (one functional `If`, `Transaction.restore_if`). This
script times each of those three parts on state shaped like the 200-layer
MLP's with Adam (600 `[32, 32]` kernels and their slots, 900 vectors of 32:
1,500 variables, 2.5 MB; the model has 1,506) against the same parts on the
same values held as one variable per shape (2 variables), in one process, one TensorFlow thread,
contenders interleaved, process CPU time per call.

The restore's branch is timed with the hold it restores from (as a
guard makes them): its own price is that row less the stacked hold's.

What it shows: the values cost little (checking 2.5 MB as 2 variables),
the number of variables is the cost (checking them as 1,500), so a
guarded step's extra time grows with the count of variables and slots,
whatever their size.

Run: `.venv/bin/python benchmarks/per_variable.py [--rounds 15] [--calls 50]`
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tensorflow as tf  # noqa: E402

from tfguard._hooks.transaction import Transaction  # noqa: E402
from tfguard._signals.stats import Reducer  # noqa: E402

SHAPES = [[32, 32]] * 600 + [[32]] * 900  # the 200-layer MLP's kernels and biases with their two Adam slots


def variables_of(layout: str) -> list[tf.Variable]:
    """The 200-layer MLP's state as 1,500 variables (`"many"`) or as one variable per shape (`"few"`)."""
    if layout == "many":
        return [tf.Variable(tf.random.normal(shape)) for shape in SHAPES]
    return [tf.Variable(tf.random.normal([600, 32, 32])), tf.Variable(tf.random.normal([900, 32]))]


def check(variables):
    """The update stage: every variable read after the step and found finite."""
    return Reducer().all_finite([tf.convert_to_tensor(v) for v in variables])


def hold(variables):
    """The transaction's stacked hold (a copy of every variable), summed so that the copy is made.

    A variable alone of its shape is held as read; it is copied here
    (`DeepCopy`) so both layouts copy the same 2.5 MB.
    """
    txn = Transaction()
    txn.hold(variables, stack=True)
    copies = {id(h.value): h.value if h.row is not None else tf.raw_ops.DeepCopy(x=h.value) for h in txn.held}
    return tf.math.is_finite(tf.add_n([tf.reduce_sum(c) for c in copies.values()]))


def hold_and_restore(variables):
    """The stacked hold and the restore's branch on a step that is not rejected (`Transaction.restore_if`), as a guard holds."""
    txn = Transaction()
    txn.hold(variables, stack=True)
    txn.restore_if(tf.constant(False))  # one functional `If` taking the stacks and every variable
    return tf.constant(True)


def looped(part, variables, calls: int):
    """A `tf.function` that runs `part(variables)` `calls` times in one graph loop."""
    @tf.function
    def run():
        total = tf.constant(0.0)
        for _ in tf.range(calls):
            total += tf.cast(part(variables), tf.float32)
        return total

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    layouts = {"many": variables_of("many"), "few": variables_of("few")}
    parts = {"update check": check, "stacked hold": hold, "hold + restore": hold_and_restore}
    runs = {(part, layout): looped(fn, layouts[layout], args.calls) for part, fn in parts.items() for layout in layouts}
    for run in runs.values():
        run()  # trace
    times = {key: [] for key in runs}
    for _ in range(args.rounds):
        for key, run in runs.items():
            began = time.process_time()
            run()
            times[key].append((time.process_time() - began) / args.calls * 1e3)
    print(f"one thread, {args.rounds} rounds of {args.calls} calls, process CPU ms per call (median)")
    print(f"{'part':16s} {'1,500 variables':>16s} {'2 variables':>12s} {'ratio':>7s} {'µs per variable':>16s}")
    for part in parts:
        many = statistics.median(times[(part, "many")])
        few = statistics.median(times[(part, "few")])
        per = (many - few) * 1e3 / len(SHAPES)
        print(f"{part:16s} {many:16.3f} {few:12.3f} {many / few:7.1f} {per:16.2f}")


if __name__ == "__main__":
    main()
