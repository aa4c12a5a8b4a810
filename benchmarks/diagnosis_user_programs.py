"""Detection, root cause first and false alarms over the user-shaped programs (a script, not a test).

Runs every program of `user_programs`, `user_programs_trust` and `user_programs_evidence` under
`tfguard run` (in this process, one after another) and prints one row each:
the expected root cause, the first warning/error the diagnosis lists, the
verdict and the run's status. A buggy program is *detected* when its cause
is among the warnings/errors, *root cause first* when the first one listed
is its cause; a healthy program has a *false alarm* for any warning or
error. `--markdown` ends with the table of docs/benchmarks.md.

    TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python benchmarks/diagnosis_user_programs.py [--markdown] [names...]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

# the project's root, for the programs the tests train (`tests.diagnose`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.diagnose import user_programs as U
from tests.diagnose import user_programs_evidence as E
from tests.diagnose import user_programs_trust as T

ALARMS = ("warning", "error")


def verdict(program, result) -> dict:
    findings = [f for d in result.diagnoses for f in d.findings if f.severity in ALARMS]
    ids = [f.id for f in findings]
    row = {"program": program.name, "cause": program.cause or "-", "first": ids[0] if ids else "-",
           "found": ",".join(dict.fromkeys(ids)) or "-", "exit": result.exit_code,
           "state": ",".join(dict.fromkeys(d.status.get("state", "?") for d in result.diagnoses)) or "-",
           "item": T.ITEMS.get(program.name, E.ITEMS.get(program.name, "")),
           "skipped": max((len(d.rules_skipped) for d in result.diagnoses), default=0),
           "rules": max((len(d.rules_skipped) + len(d.rules_run) for d in result.diagnoses), default=0)}
    if program.cause is None:
        row["ok"] = not ids and result.exit_code == 0 and bool(result.diagnoses)
        row["verdict"] = (("healthy" if row["state"] == "completed" else f"no alarm ({row['state']})")
                          if row["ok"] else "FALSE ALARM" if ids else
                          f"SCRIPT FAILED ({result.exit_code})")
    else:
        row["detected"] = program.cause in ids
        row["first_ok"] = bool(ids) and ids[0] == program.cause
        row["ok"] = row["detected"] and row["first_ok"]
        row["verdict"] = ("root cause first" if row["first_ok"] else
                          "detected, not first" if row["detected"] else "MISSED")
    return row


def markdown(rows: list[dict]) -> str:
    """The table of docs/benchmarks.md: healthy programs in one row, then one row per buggy program."""
    healthy = [r for r in rows if r["cause"] == "-"]
    alarms = sum(not r["ok"] for r in healthy)
    lines = ["| program | cause | first finding listed | verdict |", "|---|---|---|---|",
             f"| {', '.join(r['program'] for r in healthy)} | – | – | healthy "
             f"({alarms} / {len(healthy)} false alarms) |"]
    lines += [f"| {r['program']} | {r['cause']} | {r['first']} | {r['verdict']} |"
              for r in rows if r["cause"] != "-"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    programs = U.HEALTHY + T.HEALTHY + E.HEALTHY + U.BUGGY + T.BUGGY + E.BUGGY
    table = "--markdown" in argv
    argv = [a for a in argv if a != "--markdown"]
    if argv:
        programs = [p for p in programs if p.name in argv]
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for program in programs:
            start = time.perf_counter()
            result = U.run(program, root)
            row = verdict(program, result)
            row["seconds"] = time.perf_counter() - start
            rows.append(row)
            print(f"{row['program']:36s} {row['cause']:24s} {row['first']:24s} {row['verdict']:18s} "
                  f"{row['state']:16s} {row['skipped']:2d}/{row['rules']} not run "
                  f"{row['seconds']:5.1f}s  [{row['found']}]", flush=True)
    buggy = [r for r in rows if r["cause"] != "-"]
    healthy = [r for r in rows if r["cause"] == "-"]
    detected = sum(r["detected"] for r in buggy)
    first = sum(r["first_ok"] for r in buggy)
    alarms = sum(not r["ok"] for r in healthy)
    print(f"\nbuggy: {detected}/{len(buggy)} detected, root cause first in {first}/{detected or 1} "
          f"detected; healthy: {alarms}/{len(healthy)} false alarms")
    worst = max((r["skipped"] for r in healthy), default=0)
    print(f"healthy runs: at most {worst} rules could not run")
    if table:
        print("\n" + markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
