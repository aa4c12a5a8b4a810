"""Detection, root cause first and false alarms on public bug programs ported to Keras 3 (a script, not a test).

Every folder of `benchmarks/public_bugs/` holds one bug of a published benchmark nobody on the
team wrote (TensorFlow-Program-Bugs, defects4ml, AUTOTRAINER): `buggy.py`, `fixed.py` and
`meta.json` (source, license, the true symptom id, the root cause). Each program runs under
`tfguard run` in its own process, one after another, under `nice`, and its JSON report is read:

- a buggy program is *detected* when its true symptom is among the warnings and errors, and has
  its *root cause first* when the first warning or error listed is the true symptom;
- a fixed program has a *false alarm* for any warning or error.

The first warning/error of every program is kept in `public_bugs/first_findings.json`: `--check`
fails when this run's differ from it (a change that reorders findings shows in review),
`--update` rewrites it. `--markdown` ends with the table of docs/diagnosis-benchmark.md;
`--keep=DIR` keeps every program's log directory and report under DIR.

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/public_bugs.py [--check | --update] [--markdown] [--keep=DIR] [names...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "public_bugs"
SNAPSHOT = CORPUS / "first_findings.json"
SOURCE = HERE.parent / "src"
ALARMS = ("warning", "error")
#: Seconds one program may run under `tfguard run` before it counts as failed.
TIMEOUT_S = 300

#: Published figures on 52 real programs (another corpus than this one), as issue 41 quotes them.
ANCHORS = (
    "DEFault (ICSE 2025): 94.3 % detected, 63.5 % root cause",
    "DeepFD: 47/52 detected, 27/52 right fault type",
    "UMLAUT: 50/52 detected, 14/52 right type",
)


def programs(names: list[str]) -> list[dict]:
    """The corpus' meta files, sorted by folder name; only `names` when some are given."""
    found = []
    for folder in sorted(p for p in CORPUS.iterdir() if (p / "meta.json").is_file()):
        if names and folder.name not in names:
            continue
        meta = json.loads((folder / "meta.json").read_text())
        meta["folder"] = folder
        found.append(meta)
    missing = set(names) - {m["folder"].name for m in found}
    if missing:
        raise SystemExit(f"no program {sorted(missing)} in {CORPUS}; expected one of its folder names")
    return found


def alarms(report: dict) -> list[str]:
    """The warning and error ids of a `tfguard run` report, in the order the report lists them."""
    ids = [s["id"] for run in report.get("runs", []) for s in run.get("symptoms", [])
           if s.get("severity") in ALARMS]
    return list(dict.fromkeys(ids))


def run_program(script: Path, workdir: Path) -> dict:
    """Runs `script` under `tfguard run` in a fresh process and returns what its report says."""
    logdir = workdir / f"{script.parent.name}-{script.stem}"
    report = logdir / "report.json"
    command = ["nice", "-n", "10", sys.executable, "-m", "tfguard", "run", "--quiet",
               "--logdir", str(logdir), "--report", str(report), str(script)]
    env = dict(os.environ, PYTHONPATH=str(SOURCE), TF_CPP_MIN_LOG_LEVEL="2")
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        status = done.returncode
    except subprocess.TimeoutExpired:
        status = "timeout"
    seconds = time.perf_counter() - start
    if not report.is_file():
        return {"ids": [], "status": status, "seconds": seconds, "error": "no report"}
    data = json.loads(report.read_text())
    return {"ids": alarms(data), "status": status, "seconds": seconds,
            "error": data.get("error"), "runs": len(data.get("runs", []))}


def verdict(meta: dict, buggy: dict, fixed: dict) -> dict:
    truth = meta["symptom"]
    return {
        "program": meta["folder"].name, "truth": truth,
        "first": buggy["ids"][0] if buggy["ids"] else None,
        "detected": truth in buggy["ids"],
        "first_ok": bool(buggy["ids"]) and buggy["ids"][0] == truth,
        "buggy_ids": buggy["ids"], "fixed_ids": fixed["ids"],
        "fixed_first": fixed["ids"][0] if fixed["ids"] else None,
        "false_alarm": bool(fixed["ids"]),
        "failed": [f"{name}: {r['error'] or 'exit status ' + str(r['status'])}"
                   for name, r in (("buggy", buggy), ("fixed", fixed)) if r["status"] != 0 or r["error"]],
        "seconds": buggy["seconds"] + fixed["seconds"],
    }


def totals(rows: list[dict]) -> str:
    n = len(rows)
    detected = sum(r["detected"] for r in rows)
    first = sum(r["first_ok"] for r in rows)
    false_alarms = sum(r["false_alarm"] for r in rows)
    return (f"buggy: {detected}/{n} detected ({100 * detected / n:.1f} %), root cause first "
            f"{first}/{n} ({100 * first / n:.1f} %); fixed: {false_alarms}/{n} with a false alarm")


def markdown(rows: list[dict]) -> str:
    lines = ["| program | true symptom | buggy: first warning/error | verdict | fixed: warnings/errors |",
             "|---|---|---|---|---|"]
    for r in rows:
        verdict_text = ("root cause first" if r["first_ok"] else
                        "detected, not first" if r["detected"] else "missed")
        lines.append(f"| {r['program']} | `{r['truth']}` | {_ids(r['first'])} | {verdict_text} | "
                     f"{', '.join(f'`{i}`' for i in r['fixed_ids']) or 'none'} |")
    return "\n".join(lines)


def snapshot(rows: list[dict]) -> dict:
    """What each program reports first (and all its warning/error ids, in order), buggy and fixed."""
    return {r["program"]: {"buggy_first": r["first"], "buggy": r["buggy_ids"],
                           "fixed_first": r["fixed_first"], "fixed": r["fixed_ids"]} for r in rows}


def differences(old: dict, new: dict) -> tuple[list[str], list[str]]:
    """Programs whose first finding (buggy or fixed) changed or that are new, and, apart, those
    whose other warnings/errors changed (shown, not a failure: timing findings come and go)."""
    firsts, others = [], []
    for name, now in new.items():
        was = old.get(name)
        if was is None:
            firsts.append(f"{name}: not in {SNAPSHOT.name} (--update adds it)")
            continue
        for variant in ("buggy", "fixed"):
            if was.get(f"{variant}_first") != now[f"{variant}_first"]:
                firsts.append(f"{name} ({variant}): first finding {was.get(f'{variant}_first')} -> "
                              f"{now[f'{variant}_first']} (all: {was.get(variant)} -> {now[variant]})")
            elif was.get(variant) != now[variant]:
                others.append(f"{name} ({variant}): {was.get(variant)} -> {now[variant]}")
    return firsts, others


def _ids(value) -> str:
    return f"`{value}`" if value else "none"


def main(argv: list[str]) -> int:
    check, update, table = "--check" in argv, "--update" in argv, "--markdown" in argv
    names = [a for a in argv if not a.startswith("--")]
    keep = next((a.split("=", 1)[1] for a in argv if a.startswith("--keep=")), None)
    rows = []
    with tempfile.TemporaryDirectory(prefix="public-bugs-") as scratch:
        root = keep or scratch
        Path(root).mkdir(parents=True, exist_ok=True)
        for meta in programs(names):
            buggy = run_program(meta["folder"] / "buggy.py", Path(root))
            fixed = run_program(meta["folder"] / "fixed.py", Path(root))
            row = verdict(meta, buggy, fixed)
            rows.append(row)
            mark = "root cause first" if row["first_ok"] else "detected" if row["detected"] else "MISSED"
            print(f"{row['program']:24s} {row['truth']:24s} first {str(row['first']):24s} {mark:16s} "
                  f"fixed: {','.join(row['fixed_ids']) or '-':40s} {row['seconds']:5.1f}s"
                  + (f"  FAILED {row['failed']}" if row["failed"] else ""), flush=True)
    print("\n" + totals(rows))
    print("published anchors (other corpora): " + "; ".join(ANCHORS))
    if table:
        print("\n" + markdown(rows))
    now = snapshot(rows)
    old = json.loads(SNAPSHOT.read_text()) if SNAPSHOT.is_file() else {}
    if update:
        merged = {**old, **now}
        SNAPSHOT.write_text(json.dumps(dict(sorted(merged.items())), indent=2) + "\n")
        print(f"\nwrote {SNAPSHOT}")
    changed, others = differences(old, now)
    if changed:
        print(f"\nfirst findings that differ from {SNAPSHOT.name}:\n  " + "\n  ".join(changed))
    if others:
        print(f"\nlater findings that differ from {SNAPSHOT.name} (not a failure):\n  " + "\n  ".join(others))
    if any(r["failed"] for r in rows):
        return 1
    return 1 if check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
