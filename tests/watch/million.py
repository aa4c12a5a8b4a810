"""Append 10^6 scalars to a run while a `Watcher` follows it; measure every poll.

Run as `python -m tests.watch.million LOGDIR [SCALARS] [ROUNDS]` it prints one
JSON document: per poll, the bytes appended, the bytes the watch read, the
seconds the poll took, the process's RSS and the events said; and the
findings of `tfguard.diagnose.diagnose_logdir` on the finished file. Its own
process, so RSS is the watch's (and the writer's, a chunk at a time).

The run is shaped as tfguard's Logger writes one: per step `batch/loss`,
`grad_norm/global`, two layers' `grad_norm/`, `weight_norm/` and
`update_ratio/`, `batch/accuracy` (9 scalars), and at each epoch end (every
`STEPS_PER_EPOCH` steps) `train/loss`, `val/loss` and `train/epoch`. The
loss falls, then is NaN from 70 % of the steps on. Each round's bytes end
mid-record (the writer's buffer is cut anywhere): the rest of the record
comes with the next round, as a running writer's does.
"""

from __future__ import annotations

import json
import math
import sys
import time

from tests.watch.logs import EVENT_FILE, append, scalar
from tfguard.diagnose import diagnose_logdir
from tfguard.watch import Watcher

STEPS_PER_EPOCH = 1000
CARRY = 37  # bytes of the last record of a round that come with the next round
PER_STEP = ("batch/loss", "batch/accuracy", "grad_norm/global", "grad_norm/dense",
            "grad_norm/out", "weight_norm/dense", "weight_norm/out", "update_ratio/dense",
            "update_ratio/out")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")  # pragma: no cover


def _step_records(step: int, nan_from: int) -> list[bytes]:
    loss = math.nan if step >= nan_from else 2.3 * math.exp(-step / 20000) + 0.1
    values = (loss, 1 - loss / 3 if loss == loss else math.nan, 1.0, 0.5, 0.8, 10.0, 5.0,
              1e-3, 1e-3)
    out = [scalar(tag, step, value) for tag, value in zip(PER_STEP, values)]
    if step % STEPS_PER_EPOCH == 0:
        out += [scalar("train/loss", step, loss), scalar("val/loss", step, loss * 1.05),
                scalar("train/epoch", step, step // STEPS_PER_EPOCH - 1)]
    return out


def _warm_up(logdir: str) -> None:
    """Follows a small run of the same shape to its end first, so that the code the watch and the
    diagnosis load on the way (imported, and compiled in a fresh clone without `__pycache__`) is
    in memory before the first measured poll: the RSS figures are then the points' alone."""
    path = f"{logdir}/warm-up/{EVENT_FILE}"
    watcher, first = Watcher(logdir), 1
    for last in (500, 1000, 2000, 3000):
        append(path, b"".join(r for s in range(first, last + 1) for r in _step_records(s, nan_from=2100)))
        first = last + 1
        watcher.poll()
    diagnose_logdir(logdir)


def follow(logdir: str, scalars: int = 1_000_000, rounds: int = 20) -> dict:
    """Writes about `scalars` scalars in `rounds` appends, polling after each; returns the figures."""
    _warm_up(f"{logdir}-warm-up")
    path = f"{logdir}/run/{EVENT_FILE}"
    steps = scalars // (len(PER_STEP) + 3 / STEPS_PER_EPOCH)
    nan_from = int(steps * 0.7)
    watcher = Watcher(logdir)
    polls, said, carry, step, on_disk = [], [], b"", 1, 0
    for round_ in range(rounds):
        last = int(steps * (round_ + 1) / rounds)
        records = [r for s in range(step, last + 1) for r in _step_records(s, nan_from)]
        chunk = carry + b"".join(records)
        step = last + 1
        cut = len(chunk) - (CARRY if round_ < rounds - 1 else 0)  # mid-record, but the last
        chunk, carry = chunk[:cut], chunk[cut:]
        append(path, chunk)
        waited, on_disk = on_disk, (len(records[-1]) - CARRY if carry else 0)
        before, began = watcher.counter.total, time.perf_counter()
        events = watcher.poll()
        seconds = time.perf_counter() - began
        said += [{"kind": e.kind, "run": e.run, "id": e.finding.id if e.finding else None,
                  "where": e.finding.where if e.finding else None, "step": e.step,
                  "epoch": e.epoch} for e in events]
        polls.append({"appended": len(chunk), "read": watcher.counter.total - before,
                      "waited": waited,  # the half-written record's bytes read again
                      "seconds": round(seconds, 4), "rss_mb": round(_rss_mb(), 1),
                      "events": len(events), "steps": last})
    before = watcher.counter.total
    watcher.poll()
    idle_read = watcher.counter.total - before
    final = [{"run": d.run, "id": f.id, "where": f.where, "step": f.onset_step,
              "epoch": f.onset_epoch} for d in diagnose_logdir(logdir) for f in d.findings]
    opened = [{"run": run, "id": f.id, "where": f.where, "step": f.onset_step,
               "epoch": f.onset_epoch} for run, found in watcher.stream.open.items()
              for f in found.values()]
    points = sum(len(s[0]) for s in watcher.follower.snapshot(["run"])["run"].scalars.values())
    return {"polls": polls, "said": said, "final": final, "open": opened, "idle_read": idle_read,
            "scalars": points, "file_bytes": sum(p["appended"] for p in polls),
            "damage": [e for e in said if e["kind"] == "damage"]}


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(follow(args[0], *(int(a) for a in args[1:]))))
