"""Claim (issue 26): the offline commands stay bounded on logs shaped to hurt them.

Two logs are generated (the same generators as the tests that hold these
limits: `tests/events/test_many_tags.py`, `tests/diagnose/report/compare/test_select.py`):

- one event file of 10^6 one-point float32 scalars under 10^6 distinct tags
  (68 MB); `tfguard diagnose` on it, in its own process;
- a 500-run learning-rate sweep (10 epochs, 100 steps, 3 layers' gradient
  norms per run); `tfguard report` on it, in its own process.

Each command runs `--repeats` times (default 1); the median wall time (the
command's own, imports excluded), its peak resident set (`VmHWM` of
`/proc/self/status`: `ru_maxrss` would count the forking parent's) and,
for the report, the page's size are printed with the targets.

Targets: diagnose of the million-tag file <= 300 MB peak RSS; report of
500 runs <= 15 s and <= 10 MB.

Run from the repository root: `.venv/bin/python benchmarks/edge_limits.py`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.diagnose.report.compare.test_select import _sweep  # noqa: E402
from tests.events.test_many_tags import _one_point_tags  # noqa: E402

COMMAND = """
import sys, time
from tfguard.cli import main
start = time.perf_counter()
status = main(sys.argv[1:])
seconds = time.perf_counter() - start
with open("/proc/self/status") as handle:
    peak = next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:"))
print("MEASURED", status, peak, seconds)
"""


def measure(argv: list[str]) -> tuple[int, float, float]:
    """`(exit status, peak RSS in MB, seconds)` of `tfguard ARGV` in a fresh process."""
    done = subprocess.run([sys.executable, "-c", COMMAND, *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    line = [x for x in done.stdout.splitlines() if x.startswith("MEASURED")][-1].split()
    return int(line[1]), int(line[2]) / 1024, float(line[3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        tags = os.path.join(root, "tags")
        _one_point_tags(os.path.join(tags, "run", "events.out.tfevents.1.host"), 1_000_000)
        runs = [measure(["diagnose", tags]) for _ in range(args.repeats)]
        status = runs[0][0]
        rss = statistics.median(r[1] for r in runs)
        seconds = statistics.median(r[2] for r in runs)
        print(f"diagnose, 10^6 one-point tags: exit {status}, {seconds:.1f} s, peak RSS "
              f"{rss:.0f} MB (target <= 300 MB: {'ok' if rss <= 300 else 'MISSED'})")

        sweep, page = os.path.join(root, "sweep"), os.path.join(root, "report.html")
        _sweep(sweep, 500)
        runs = [measure(["report", sweep, "-o", page]) for _ in range(args.repeats)]
        seconds = statistics.median(r[2] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        size = os.path.getsize(page) / 1e6
        ok = seconds <= 15 and size <= 10
        print(f"report, 500 runs: exit {runs[0][0]}, {seconds:.1f} s, {size:.2f} MB, peak RSS "
              f"{rss:.0f} MB (target <= 15 s and <= 10 MB: {'ok' if ok else 'MISSED'})")


if __name__ == "__main__":
    main()
