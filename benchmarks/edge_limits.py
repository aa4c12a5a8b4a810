"""Claim (issues 26, 46): the offline commands and the watch stay bounded on logs shaped to hurt them.

Three logs are generated (the same generators as the tests that hold these
limits: `tests/events/test_many_tags.py`, `tests/diagnose/report/compare/test_select.py`,
`tests/watch/test_many_runs.py`):

- one event file of 10^6 one-point float32 scalars under 10^6 distinct tags
  (68 MB); `tfguard diagnose` on it, in its own process;
- a 500-run learning-rate sweep (10 epochs, 100 steps, 3 layers' gradient
  norms per run); `tfguard report` on it, in its own process;
- many runs (issue 46): 20 runs of 60,000 one-point tags each (78 MB);
  `tfguard diagnose` and `tfguard watch --once` on it, each in its own process.

Each command runs `--repeats` times (default 1); the median wall time (the
command's own, imports excluded), its peak resident set (`VmHWM` of
`/proc/self/status`: `ru_maxrss` would count the forking parent's) and,
for the report, the page's size are printed with the targets.

Targets: diagnose of the million-tag file <= 300 MB peak RSS; report of
500 runs <= 15 s and <= 10 MB; diagnose and watch of the 20 runs <= 300 MB
peak RSS each (before issue 46: 2.1 GB and 2.6 GB).

Run from the repository root: `.venv/bin/python benchmarks/edge_limits.py`
(`--only runs` for the many-runs log alone). The commands run the `tfguard`
found first on `sys.path`: `PYTHONPATH=OTHER/src` measures another tree with
the same logs (the figures before a change).
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

RUNS, TAGS_PER_RUN = 20, 60_000

COMMAND = """
import sys, time
from tfguard._cli import main
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


def _median(argv: list[str], repeats: int) -> tuple[int, float, float]:
    runs = [measure(argv) for _ in range(repeats)]
    return runs[0][0], statistics.median(r[1] for r in runs), statistics.median(r[2] for r in runs)


def many_runs(root: str, repeats: int) -> None:
    """`tfguard diagnose` and `tfguard watch --once` on RUNS runs of TAGS_PER_RUN one-point tags."""
    logdir = os.path.join(root, "many")
    for i in range(RUNS):
        _one_point_tags(os.path.join(logdir, f"run_{i:02d}", "events.out.tfevents.1.host"), TAGS_PER_RUN)
    for argv in (["diagnose", logdir, "--json"], ["watch", logdir, "--once", "--json"]):
        status, rss, seconds = _median(argv, repeats)
        print(f"{argv[0]}, {RUNS} runs x {TAGS_PER_RUN:,} one-point tags: exit {status}, "
              f"{seconds:.1f} s, peak RSS {rss:.0f} MB (target <= 300 MB: "
              f"{'ok' if rss <= 300 else 'MISSED'})")


def many_tags(root: str, repeats: int) -> None:
    """`tfguard diagnose` on one file of 10^6 one-point tags."""
    tags = os.path.join(root, "tags")
    _one_point_tags(os.path.join(tags, "run", "events.out.tfevents.1.host"), 1_000_000)
    status, rss, seconds = _median(["diagnose", tags], repeats)
    print(f"diagnose, 10^6 one-point tags: exit {status}, {seconds:.1f} s, peak RSS "
          f"{rss:.0f} MB (target <= 300 MB: {'ok' if rss <= 300 else 'MISSED'})")


def big_report(root: str, repeats: int) -> None:
    """`tfguard report` on a 500-run sweep."""
    sweep, page = os.path.join(root, "sweep"), os.path.join(root, "report.html")
    _sweep(sweep, 500)
    status, rss, seconds = _median(["report", sweep, "-o", page], repeats)
    size = os.path.getsize(page) / 1e6
    ok = seconds <= 15 and size <= 10
    print(f"report, 500 runs: exit {status}, {seconds:.1f} s, {size:.2f} MB, peak RSS "
          f"{rss:.0f} MB (target <= 15 s and <= 10 MB: {'ok' if ok else 'MISSED'})")


SECTIONS = {"tags": many_tags, "report": big_report, "runs": many_runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--only", choices=tuple(SECTIONS), default=None, help="measure one log only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        for name, section in SECTIONS.items():
            if args.only in (None, name):
                section(root, args.repeats)


if __name__ == "__main__":
    main()
