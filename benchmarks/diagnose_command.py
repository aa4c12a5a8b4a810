"""Claim: `tfguard diagnose DIR --json`, as a whole command, is >= 10x faster than tbparse.

A user runs a command, so this times whole processes, start-up and imports
included, on one log: 1,000,000 TF2 scalars (10 tags x 100,000 steps) plus
about 50 histograms, written by `benchmarks/read_events.py`'s `write_log`
(the bytes `tf.summary.scalar` writes).

Contenders, each its own fresh process, run in turn (interleaved, the order
rotated every round):

- tfguard: the `tfguard diagnose DIR --json` command (the console script
  next to this Python, else `python -m tfguard`): read, diagnose, print the
  JSON report.
- tbparse: `python -c` with `SummaryReader(DIR, event_types={"tensors"},
  extra_columns={"wall_time"}).tensors` (TF2 summaries are tensors; asking
  for tensors only is tbparse's fastest setting that returns them).
- EventAccumulator: `python -c` with `EventAccumulator(run,
  size_guidance={...: 0})` (keep all, no downsampling), `Reload()`, then
  `tensor_util.make_ndarray` on every tensor event to get the numbers.

The tfguard and the tbparse process both get every scalar; tbparse and
EventAccumulator only read, where tfguard also diagnoses and prints a
report. Time: wall clock from start to exit, `--repeats` rounds (default
3); medians are compared. Memory: each process's own peak resident set,
read by `/usr/bin/time` (`%M`, "Maximum resident set size" of `-v`). tfguard's
command must also leave TensorFlow and Keras unimported and print nothing
on stderr (no TensorFlow banner): both are checked once before the timings.

Targets (issue 12): tbparse / tfguard >= 10x, tfguard <= 2.5 s, tfguard's
peak RSS <= 300 MB.

Run: `.venv/bin/python benchmarks/diagnose_command.py [--repeats 3]`
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from read_events import HIST_TAGS, SCALAR_TAGS, write_log  # noqa: E402

TARGET_RATIO = 10.0
TARGET_SECONDS = 2.5
TARGET_RSS_MB = 300.0

_TBPARSE = """
import sys
from tbparse import SummaryReader
frame = SummaryReader(sys.argv[1], event_types={"tensors"}, extra_columns={"wall_time"}).tensors
print(int(frame["tag"].isin(TAGS).sum()))
""".replace("TAGS", repr(SCALAR_TAGS))

_EVENT_ACCUMULATOR = """
import os, sys
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.util import tensor_util
guidance = {kind: 0 for kind in (ea.TENSORS, ea.SCALARS, ea.HISTOGRAMS, ea.IMAGES)}
accumulator = ea.EventAccumulator(os.path.join(sys.argv[1], "train"), size_guidance=guidance)
accumulator.Reload()
points = 0
for tag in accumulator.Tags()["tensors"]:
    arrays = [tensor_util.make_ndarray(e.tensor_proto) for e in accumulator.Tensors(tag)]
    points += len(arrays) if tag in TAGS else 0
print(points)
""".replace("TAGS", repr(SCALAR_TAGS))

# The tfguard process: the same check as a test, run once before the timings.
_TFGUARD_CHECK = """
import sys
from tfguard._cli import main
status = main(["diagnose", sys.argv[1], "--json"])
loaded = sorted(m for m in ("tensorflow", "keras", "matplotlib", "pandas") if m in sys.modules)
print("LOADED", *loaded, file=sys.stderr if loaded else sys.stdout)
sys.exit(status)
"""


def tfguard_command() -> list[str]:
    """The `tfguard` console script installed beside this Python, else `python -m tfguard`."""
    script = os.path.join(os.path.dirname(sys.executable), "tfguard")
    return [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "tfguard"]


def contenders(logdir: str) -> dict[str, list[str]]:
    return {
        "tfguard diagnose": [*tfguard_command(), "diagnose", logdir, "--json"],
        "tbparse": [sys.executable, "-c", _TBPARSE, logdir],
        "EventAccumulator": [sys.executable, "-c", _EVENT_ACCUMULATOR, logdir],
    }


_TIME = "/usr/bin/time"


def timed(command: list[str], *, capture: bool = False) -> tuple[float, float, int, bytes, bytes]:
    """Runs `command` as a process: (wall seconds, peak RSS in MB, status, stdout, stderr).

    The peak is the process's own, read by `/usr/bin/time` (a small parent):
    a child forked from this Python would carry this Python's peak over
    `exec` in `ru_maxrss`. Without `/usr/bin/time`, `os.wait4`'s figure
    is shown, which has that floor.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        sink = {"stdout": out, "stderr": err} if capture else {
            "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        wrapped = [_TIME, "-f", "%M", "-o", rss.name, *command] if os.path.exists(_TIME) else command
        began = time.perf_counter()
        process = subprocess.Popen(wrapped, **sink)
        _pid, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - began
        process.returncode = code = os.waitstatus_to_exitcode(status)
        figures = rss.read().split()
        peak_kib = int(figures[-1]) if wrapped is not command and figures else usage.ru_maxrss
        out.seek(0)
        err.seek(0)
        return wall, peak_kib / 1000, code, out.read(), err.read()


def check_outputs(logdir: str, commands: dict[str, list[str]]) -> list[str]:
    """Runs each contender once, checks what it read; returns the problems found."""
    problems = []
    expected = 100_000 * len(SCALAR_TAGS)
    _, _, code, out, err = timed([sys.executable, "-c", _TFGUARD_CHECK, logdir], capture=True)
    report = json.loads(out.decode().split("\nLOADED")[0])
    metrics = report["runs"][0]["metrics"] if report["runs"] else {}
    if sorted(metrics) != sorted(SCALAR_TAGS):
        problems.append(f"tfguard's report has metrics {sorted(metrics)}, expected {SCALAR_TAGS}")
    if err.strip():
        problems.append(f"tfguard diagnose wrote on stderr: {err.decode(errors='replace')[:300]!r}")
    _, _, code, out, err = timed(commands["tfguard diagnose"], capture=True)
    if err.strip():
        problems.append(f"the tfguard command wrote on stderr: {err.decode(errors='replace')[:300]!r}")
    for name in ("tbparse", "EventAccumulator"):
        _, _, code, out, err = timed(commands[name], capture=True)
        points = out.decode().strip().splitlines()[-1:] if code == 0 else []
        if points != [str(expected)]:
            problems.append(f"{name} (exit {code}) read {points}, expected {expected} scalars: "
                            f"{err.decode(errors='replace')[-300:]!r}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000, help="steps per scalar tag")
    parser.add_argument("--hist-steps", type=int, default=12,
                        help=f"steps per histogram tag ({len(HIST_TAGS)} tags)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--logdir", default=None, help="reuse this log (written if missing)")
    args = parser.parse_args(argv)
    env_before = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)  # a user's shell: TensorFlow's banner on
    owned = args.logdir is None
    logdir = args.logdir or tempfile.mkdtemp(prefix="tfguard-bench-")
    try:
        if not os.path.isdir(os.path.join(logdir, "train")):
            began = time.perf_counter()
            write_log(logdir, args.steps, args.hist_steps)
            print(f"log written in {time.perf_counter() - began:.1f} s")
        run = os.path.join(logdir, "train")
        size = sum(os.path.getsize(os.path.join(run, n)) for n in os.listdir(run))
        hist_every = max(1, args.steps // args.hist_steps)
        hists = len(range(0, args.steps, hist_every)) * len(HIST_TAGS)
        print(f"log: {args.steps * len(SCALAR_TAGS):,} scalars + {hists} histograms, "
              f"{size / 2**20:.1f} MiB, in {logdir}")
        commands = contenders(logdir)
        problems = check_outputs(logdir, commands) if args.steps == 100_000 else []
        for problem in problems:
            print("PROBLEM:", problem)
        times: dict[str, list[float]] = {name: [] for name in commands}
        peaks: dict[str, list[float]] = {name: [] for name in commands}
        names = list(commands)
        for round_ in range(max(1, args.repeats)):
            order = names[round_ % len(names):] + names[: round_ % len(names)]
            for name in order:
                wall, peak, code, _, _ = timed(commands[name])
                if code != 0 and not (name == "tfguard diagnose" and code == 1):
                    problems.append(f"{name} exited with status {code}")
                times[name].append(wall)
                peaks[name].append(peak)
                print(f"  round {round_ + 1}: {name:<18}{wall:7.2f} s {peak:7.0f} MB", flush=True)
    finally:
        if env_before is not None:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = env_before
        if owned:
            shutil.rmtree(logdir, ignore_errors=True)
    base = statistics.median(times["tfguard diagnose"])
    print(f"\n{'process':<20}{'median s':>10}{'x tfguard':>11}{'peak RSS':>12}")
    for name in names:
        median = statistics.median(times[name])
        print(f"{name:<20}{median:10.2f}{median / base:10.1f}x{max(peaks[name]):8.0f} MB")
    ratio = statistics.median(times["tbparse"]) / base
    rss = max(peaks["tfguard diagnose"])
    verdicts = [
        (f"tbparse / tfguard = {ratio:.1f}x", f">= {TARGET_RATIO:.0f}x", ratio >= TARGET_RATIO),
        (f"tfguard diagnose = {base:.2f} s", f"<= {TARGET_SECONDS} s", base <= TARGET_SECONDS),
        (f"tfguard peak RSS = {rss:.0f} MB", f"<= {TARGET_RSS_MB:.0f} MB", rss <= TARGET_RSS_MB),
    ]
    print()
    for figure, target, met in verdicts:
        print(f"{figure} (target {target}: {'met' if met else 'NOT met'})")
    met = all(m for _, _, m in verdicts) and not problems
    for problem in problems:
        print("PROBLEM:", problem)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
