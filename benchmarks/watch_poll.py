"""Claim: `tfguard watch` costs each poll in proportion to the bytes appended, in bounded memory.

Three measurements, each printed as a table:

1. Per-poll cost against the bytes appended. A run already holding 10^5
   scalars (tfguard's Logger layout, `tests/watch/million.py`'s tags) gets
   N more steps appended (9 scalars a step), then one `Watcher.poll`:
   the bytes the watch read (counted, `ByteCounter`), the seconds reading
   them, and the seconds re-running the diagnosis rules on the run. Median
   of `--repeats` rounds.
2. Over a long job: 10^6 scalars appended in 20 rounds while the watch
   follows (`tests/watch/million.py`, in a child process): per poll, the
   series length, seconds, RSS.
3. What the watch saves: `tfguard.diagnose.diagnose_logdir` on the
   finished 10^6-scalar file (what a cron job re-reading everything pays
   at every look).

Run: `.venv/bin/python benchmarks/watch_poll.py [--repeats 3]`
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "src"), ROOT]

from tests.watch.logs import EVENT_FILE, append  # noqa: E402
from tests.watch.million import PER_STEP, _step_records  # noqa: E402

from tfguard.diagnose import diagnose_logdir  # noqa: E402
from tfguard.watch import Watcher  # noqa: E402

BASE_STEPS = 100_000 // len(PER_STEP)


def per_poll(repeats: int) -> list[dict]:
    """Table 1: one poll after N appended steps, on a run of 10^5 scalars."""
    rows = []
    for steps in (1, 10, 100, 1_000, 10_000, 50_000):
        reads, read_s, diag_s = [], [], []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as logdir:
                path = os.path.join(logdir, "run", EVENT_FILE)
                append(path, b"".join(r for s in range(1, BASE_STEPS + 1)
                                      for r in _step_records(s, 10**9)))
                watcher = Watcher(logdir)
                watcher.poll()
                append(path, b"".join(r for s in range(BASE_STEPS + 1, BASE_STEPS + steps + 1)
                                      for r in _step_records(s, 10**9)))
                before = watcher.counter.total
                watcher.poll()
                reads.append(watcher.counter.total - before)
                read_s.append(watcher.last_timing["read_s"])
                diag_s.append(watcher.last_timing["diagnose_s"])
        rows.append({"scalars appended": steps * len(PER_STEP), "bytes read": int(statistics.median(reads)),
                     "read ms": 1000 * statistics.median(read_s),
                     "rules ms": 1000 * statistics.median(diag_s)})
    return rows


def long_job() -> dict:
    """Table 2: 10^6 scalars in 20 rounds, in a child process (its RSS is the watch's)."""
    with tempfile.TemporaryDirectory() as logdir:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), ROOT]))
        done = subprocess.run([sys.executable, "-m", "tests.watch.million", logdir],
                              capture_output=True, text=True, env=env, cwd=ROOT, check=True)
        figures = json.loads(done.stdout)
        began = time.perf_counter()
        diagnose_logdir(logdir)
        figures["diagnose_logdir_s"] = time.perf_counter() - began
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print("1. one poll on a run of 10^5 scalars, after N scalars were appended")
    print("| scalars appended | bytes read | read ms | rules ms |\n|---|---|---|---|")
    for row in per_poll(args.repeats):
        print(f"| {row['scalars appended']:,} | {row['bytes read']:,} | {row['read ms']:.1f} "
              f"| {row['rules ms']:.1f} |")
    figures = long_job()
    polls = figures["polls"]
    print("\n2. 10^6 scalars appended in 20 rounds (each cut mid-record) while the watch follows")
    print("| after round | scalars in the run | bytes appended | bytes read | poll s | RSS MB |")
    print("|---|---|---|---|---|---|")
    for i in (0, 4, 9, 14, 19):
        p = polls[i]
        print(f"| {i + 1} | {p['steps'] * len(PER_STEP):,} | {p['appended']:,} | {p['read']:,} "
              f"| {p['seconds']:.3f} | {p['rss_mb']:.1f} |")
    grown = polls[-1]["rss_mb"] - polls[0]["rss_mb"]
    print(f"\nRSS growth from round 1 to 20: {grown:.1f} MB for {figures['scalars']:,} scalars kept "
          f"({grown * 2**20 / figures['scalars']:.0f} B a scalar; the file is "
          f"{figures['file_bytes'] / 2**20:.1f} MiB, {figures['file_bytes'] / figures['scalars']:.0f} B a scalar)")
    print(f"idle poll (nothing appended): {figures['idle_read']} bytes read")
    print(f"3. diagnose_logdir on the finished file (re-reading everything): "
          f"{figures['diagnose_logdir_s']:.2f} s vs the last poll's {polls[-1]['seconds']:.2f} s")
    print(f"findings at the end: watch {sorted((f['id'], f['step']) for f in figures['open'])}, "
          f"diagnose {sorted((f['id'], f['step']) for f in figures['final'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
