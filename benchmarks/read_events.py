"""Claim: tfguard reads TensorBoard logs at least 10x faster than tbparse.

The log: one run of 1,000,000 TF2 scalars (10 tags x 100,000 steps, float32
tensors with the 'scalars' plugin, exactly the bytes `tf.summary.scalar`
writes) plus 4,000 histograms (4 tags x 1,000 steps, 30 buckets), written
with the TFRecord framing into a temporary directory.

Contenders, each delivering every scalar as (step, wall time, value) and every
histogram:

- tfguard: `tfguard.events.read_logdir(logdir)`.
- tbparse: `SummaryReader(logdir, event_types={"tensors"},
  extra_columns={"wall_time"}).tensors` (TF2 summaries are tensors; asking
  for tensors only is tbparse's fastest setting that returns them).
- EventAccumulator: `EventAccumulator(run, size_guidance={...: 0})` (keep
  all, no downsampling), `Reload()`, then `tensor_util.make_ndarray` on every
  tensor event to get the numbers.

Also shown, outside the comparison: tfguard reading one scalar tag only
(`tags=[...]`), the case of a diagnosis rule that needs one series; and
EventAccumulator's `Reload()` alone, which leaves the values as tensor protos.

Time: wall time, all contenders in this one process, round-robin (`--repeats`
rounds, default 2), each after a `gc.collect()`; the median of each is
compared with tfguard's.

Memory: peak resident memory, measured for each contender in a fresh child
process (one at a time): after the imports, the kernel's peak-RSS counter is
reset (`/proc/self/clear_refs`), the log is read, and the peak growth over
the post-import RSS is reported. RSS rather than tracemalloc because
tracemalloc misses what C and C++ allocate (TensorFlow's record reader,
protobuf's arenas), which would flatter the readers that use them.

Run: `.venv/bin/python benchmarks/read_events.py [--repeats 2] [--no-memory]`
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from tensorboard.compat.proto import event_pb2  # noqa: E402

from tfguard.events import read_logdir  # noqa: E402
from tfguard.events._records import frame_record  # noqa: E402

TARGET = 10.0
SCALAR_TAGS = [f"train/metric_{i}" for i in range(10)]
HIST_TAGS = [f"hist/weights/layer_{i}" for i in range(4)]


def write_log(logdir: str, steps: int, hist_steps: int) -> str:
    """Write the benchmark run; return the run directory."""
    run = os.path.join(logdir, "train")
    os.makedirs(run)
    path = os.path.join(run, "events.out.tfevents.1700000000.bench.1.v2")
    scalar = event_pb2.Event()
    value = scalar.summary.value.add()
    value.metadata.plugin_data.plugin_name = "scalars"
    value.tensor.dtype = 1  # DT_FLOAT, shape []
    hist = event_pb2.Event()
    hvalue = hist.summary.value.add()
    hvalue.metadata.plugin_data.plugin_name = "histograms"
    hvalue.tensor.dtype = 2  # DT_DOUBLE, shape [30, 3]
    hvalue.tensor.tensor_shape.dim.add(size=30)
    hvalue.tensor.tensor_shape.dim.add(size=3)
    edges = np.linspace(-1.0, 1.0, 31)
    hist_every = max(1, steps // hist_steps)
    rng = np.random.default_rng(0)
    header = event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2")
    with open(path, "wb") as f:
        f.write(frame_record(header.SerializeToString()))
        chunk = []
        for step in range(steps):
            scalar.step = step
            scalar.wall_time = 1.7e9 + step * 0.01
            for i, tag in enumerate(SCALAR_TAGS):
                value.tag = tag
                value.tensor.tensor_content = struct.pack("<f", i + 1.0 / (step + 1))
                chunk.append(frame_record(scalar.SerializeToString()))
            if step % hist_every == 0:
                hist.step = step
                hist.wall_time = scalar.wall_time
                for tag in HIST_TAGS:
                    counts = rng.integers(0, 100, 30).astype(np.float64)
                    hvalue.tag = tag
                    hvalue.tensor.tensor_content = np.stack(
                        [edges[:-1], edges[1:], counts], axis=1
                    ).tobytes()
                    chunk.append(frame_record(hist.SerializeToString()))
            if len(chunk) > 50_000:
                f.write(b"".join(chunk))
                chunk = []
        f.write(b"".join(chunk))
    return run


# -- the contenders: each returns (number of scalar points, sum of their values) --


def read_tfguard(logdir: str) -> tuple[int, float]:
    run = read_logdir(logdir)["train"]
    points = sum(len(steps) for steps, _, _ in run.scalars.values())
    total = sum(float(values.sum()) for _, _, values in run.scalars.values())
    assert sum(len(p) for p in run.histograms.values()) > 0
    return points, total


def read_tfguard_one_tag(logdir: str) -> tuple[int, float]:
    steps, _, values = read_logdir(logdir, tags=[SCALAR_TAGS[0]])["train"].scalars[SCALAR_TAGS[0]]
    return len(steps), float(values.sum())


def read_tbparse(logdir: str) -> tuple[int, float]:
    from tbparse import SummaryReader

    frame = SummaryReader(logdir, event_types={"tensors"}, extra_columns={"wall_time"}).tensors
    scalars = frame[frame["tag"].isin(SCALAR_TAGS)]
    assert (~frame["tag"].isin(SCALAR_TAGS)).sum() > 0
    return len(scalars), float(scalars["value"].astype(np.float64).sum())


def read_event_accumulator(logdir: str) -> tuple[int, float]:
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    guidance = {kind: 0 for kind in (ea.TENSORS, ea.SCALARS, ea.HISTOGRAMS, ea.IMAGES)}
    accumulator = ea.EventAccumulator(os.path.join(logdir, "train"), size_guidance=guidance)
    accumulator.Reload()
    points, total = 0, 0.0
    for tag in accumulator.Tags()["tensors"]:
        arrays = [
            (e.step, e.wall_time, tensor_util.make_ndarray(e.tensor_proto))
            for e in accumulator.Tensors(tag)
        ]
        if tag in SCALAR_TAGS:
            points += len(arrays)
            total += float(sum(float(a) for _, _, a in arrays))
    return points, total


def read_event_accumulator_reload_only(logdir: str) -> tuple[int, float]:
    from tensorboard.backend.event_processing import event_accumulator as ea

    guidance = {kind: 0 for kind in (ea.TENSORS, ea.SCALARS, ea.HISTOGRAMS, ea.IMAGES)}
    accumulator = ea.EventAccumulator(os.path.join(logdir, "train"), size_guidance=guidance)
    accumulator.Reload()
    points = sum(len(accumulator.Tensors(tag)) for tag in SCALAR_TAGS)
    return points, float("nan")


CONTENDERS = {
    "tfguard": read_tfguard,
    "tbparse": read_tbparse,
    "EventAccumulator": read_event_accumulator,
    # Outside the comparison: what a tag filter costs, and EventAccumulator
    # without turning its tensor protos into numbers.
    "tfguard, 1 tag": read_tfguard_one_tag,
    "EA, Reload only": read_event_accumulator_reload_only,
}


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(name: str, logdir: str) -> None:
    """In a fresh process: peak RSS growth of one contender, as JSON on stdout."""
    import tbparse  # noqa: F401 - imports are not the reader's memory
    import tensorflow  # noqa: F401
    from tensorboard.backend.event_processing import event_accumulator  # noqa: F401

    gc.collect()
    before = _rss_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM, the peak RSS
    except OSError:
        pass
    result = CONTENDERS[name](logdir)
    peak = _rss_kib("VmHWM")
    print(json.dumps({"peak_growth_mib": (peak - before) / 1024, "result": result}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000, help="steps per scalar tag")
    parser.add_argument("--hist-steps", type=int, default=1_000, help="steps per histogram tag")
    parser.add_argument("--repeats", type=int, default=2, help="round-robin rounds (>= 2)")
    parser.add_argument("--no-memory", action="store_true", help="skip the child processes")
    parser.add_argument("--child", nargs=2, metavar=("CONTENDER", "LOGDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    with tempfile.TemporaryDirectory(prefix="tfguard-bench-") as logdir:
        began = time.perf_counter()
        run = write_log(logdir, args.steps, args.hist_steps)
        size = sum(os.path.getsize(os.path.join(run, n)) for n in os.listdir(run))
        print(
            f"log: {args.steps * len(SCALAR_TAGS):,} scalars + "
            f"{args.hist_steps * len(HIST_TAGS):,} histograms, {size / 2**20:.1f} MiB, "
            f"written in {time.perf_counter() - began:.1f} s"
        )
        import tbparse  # noqa: F401 - import outside the timings
        import tensorflow  # noqa: F401

        times: dict[str, list[float]] = {name: [] for name in CONTENDERS}
        results: dict[str, tuple[int, float]] = {}
        for round_ in range(max(2, args.repeats)):
            for name, read in CONTENDERS.items():
                gc.collect()
                began = time.perf_counter()
                results[name] = read(logdir)
                times[name].append(time.perf_counter() - began)
                print(f"  round {round_ + 1}: {name:<16} {times[name][-1]:7.2f} s", flush=True)
        expected = results["tfguard"]
        for name, (points, total) in list(results.items())[:3]:
            if points != expected[0] or not np.isclose(total, expected[1], rtol=1e-6):
                print(
                    f"MISMATCH: {name} read {points} points summing to {total}, tfguard {expected}"
                )
                return 1
        memory: dict[str, float] = {}
        if not args.no_memory:
            for name in CONTENDERS:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", name, logdir],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                memory[name] = json.loads(out.stdout.strip().splitlines()[-1])["peak_growth_mib"]
    base = statistics.median(times["tfguard"])
    print(f"\n{'reader':<18}{'median s':>10}{'x tfguard':>11}{'peak RSS growth':>18}")
    for name, values in times.items():
        mem = f"{memory[name]:13.0f} MiB" if name in memory else f"{'-':>17}"
        print(
            f"{name:<18}{statistics.median(values):10.2f}{statistics.median(values) / base:10.1f}x {mem}"
        )
    ratio = statistics.median(times["tbparse"]) / base
    verdict = "met" if ratio >= TARGET else "NOT met"
    print(f"\ntbparse / tfguard = {ratio:.1f}x (target >= {TARGET:.0f}x: {verdict})")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
