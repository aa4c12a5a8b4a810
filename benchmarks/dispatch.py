"""Claim: tfguard's train function does not pay `tf.function`'s lookup of its trace on every step.

Each call of a `tf.function` finds its trace anew: it hashes the type of
every input and of every capture, and a train step captures each variable
of the model and of its optimizer. Keras's own train function pays that on
every step. tfguard's (`tfguard._firewall.train_function.TraceOfSpec`)
looks the trace of an iterator's element spec up once and then calls it as
a `ConcreteFunction`.

This script traces one train step per model, as Keras builds it for one
replica (the batch pulled in the graph, `train_step` in an inner
`tf.function`), and calls that same trace two ways, interleaved in one
process: through the `tf.function` (Keras's way) and through `TraceOfSpec`
(tfguard's). It prints the captures of the trace, the median wall time of a
call each way (rounds of `--calls` calls, each round ended by reading the
loss), and their ratio: the share of a step the lookup costs.
`benchmarks/depth.py` gives the same models' whole `fit` with each
contender.

Run: `.venv/bin/python benchmarks/dispatch.py [--models mlp_deep100,mlp_deep200] [--rounds 10] [--calls 25]`
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

from scale_models import MODELS, dataset  # noqa: E402
from tfguard._firewall.train_function import TraceOfSpec  # noqa: E402


def step_function(model):
    """Keras's train function for one replica: `iterator -> logs`, the batch pulled in the graph."""
    one_step = tf.function(model.train_step, reduce_retracing=True)
    return tf.function(lambda iterator: one_step(iterator.get_next()), reduce_retracing=True)


def measure(name: str, rounds: int, calls: int) -> tuple[int, float, float]:
    """`(captures, ms per call through the tf.function, ms per call through TraceOfSpec)` on model `name`."""
    model = MODELS[name]()
    data = dataset(model, steps=8, batch=64).repeat()
    model.fit(data, steps_per_epoch=2, verbose=0)  # builds the optimizer's slots and the metrics
    iterator = iter(data)
    keras_way = step_function(model)
    held = TraceOfSpec(keras_way)
    held(iterator)  # traces once; both ways call this trace
    keras_way(iterator)
    ways = {"tf.function": keras_way, "TraceOfSpec": held}
    times: dict[str, list[float]] = {way: [] for way in ways}
    for round_ in range(rounds):
        order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
        for way in order:
            began = time.perf_counter()
            for _ in range(calls):
                logs = ways[way](iterator)
            float(logs["loss"])
            times[way].append((time.perf_counter() - began) / calls * 1e3)
    captures = len(held.trace.captured_inputs)
    return captures, statistics.median(times["tf.function"]), statistics.median(times["TraceOfSpec"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp_deep100,mlp_deep200")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=25)
    args = parser.parse_args(argv)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    print(f"one TensorFlow thread, {args.rounds} interleaved rounds of {args.calls} calls, wall ms per call (median)")
    print("| model | captures | tf.function (Keras) | TraceOfSpec (tfguard) | × |")
    print("|---|---|---|---|---|")
    for name in args.models.split(","):
        captures, looked_up, held = measure(name, args.rounds, args.calls)
        print(f"| {name} | {captures} | {looked_up:.2f} | {held:.2f} | {looked_up / held:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
