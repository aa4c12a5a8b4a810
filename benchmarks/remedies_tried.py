"""Remedies tried and measured over the project's buggy programs (a script, not a test).

For every program of `programs.PROGRAMS` (trained through
`tfguard.try_fixes`, the notebook API) and `user_programs` (scripts run as
`tfguard run --try-fixes` would, through `try_script_fixes`), it prints the
original run's alarms and one row per trial: the finding, the change tried,
the measure before and after, and the verdict. A detected problem is
*helped* when one of its trials improved the measure (by more than the 5 %
margin); the last lines give the share of detected problems helped, and
check that no trial claims a fix its numbers do not show.

    TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python benchmarks/remedies_tried.py [names...]
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path

# the project's root, for the programs the tests train (`tests.diagnose`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.diagnose import programs as P
from tests.diagnose import user_programs as U

from tfguard.remedies import try_fixes, try_script_fixes

ALARMS = ("warning", "error")


def train_of(program):
    def train():
        model, fit_kwargs, _hparams, _lint = program.build()
        model.fit(**fit_kwargs, verbose=0)
    return train


def honest(trial) -> bool:
    """A fix must be shown by its numbers: after below before by the margin (or before not finite)."""
    if not trial.fix:
        return True
    if not math.isfinite(trial.before):
        return math.isfinite(trial.after)
    return trial.after < trial.before - trial.margin * abs(trial.before)


def run_program(program, root: Path):
    if isinstance(program, U.UserProgram):
        folder = root / program.name
        folder.mkdir(parents=True, exist_ok=True)
        script = folder / "train.py"
        script.write_text(program.source())
        outcome = try_script_fixes(script, logdir=folder / "runs", report=folder / "report.json")
        alarms = [f.id for d in outcome.result.diagnoses for f in d.findings if f.severity in ALARMS]
        return program.cause, alarms, list(outcome.trials)
    found = try_fixes(train_of(program))
    alarms = [f.id for f in found.findings if f.severity in ALARMS]
    return program.target, alarms, list(found)


def main(argv: list[str]) -> int:
    programs = [p for p in P.PROGRAMS if p.target is not None] + list(U.BUGGY)
    if argv:
        programs = [p for p in programs if p.name in argv]
    rows, problems = [], []
    with tempfile.TemporaryDirectory() as root:
        for program in programs:
            start = time.perf_counter()
            cause, alarms, trials = run_program(program, Path(root))
            detected = cause in alarms
            helped = any(t.fix for t in trials)
            problems.append((program.name, cause, detected, helped, trials))
            print(f"\n{program.name}: cause {cause}, alarms [{', '.join(dict.fromkeys(alarms))}], "
                  f"{len(trials)} trial(s), {time.perf_counter() - start:.0f}s", flush=True)
            for t in trials:
                rows.append(t)
                print(f"  {t.finding:24s} {t.change[:70]:70s} {t.measure:20s} {t.before:9.4g} -> "
                      f"{t.after:9.4g}  {t.verdict}", flush=True)
    detected = [p for p in problems if p[2]]
    helped = [p for p in detected if p[3]]
    print("\n| program | cause | detected | change that helped (best) | before | after |")
    print("|---|---|---|---|---|---|")
    for name, cause, det, _, trials in problems:
        best = min((t for t in trials if t.fix), key=lambda t: t.after / t.before
                   if math.isfinite(t.before) and t.before else 0, default=None)
        change = best.change[:90] if best else "none helped" if trials else "no trial"
        before = f"{best.before:.4g}" if best else "-"
        after = f"{best.after:.4g}" if best else "-"
        print(f"| {name} | {cause} | {'yes' if det else 'no'} | {change} | {before} | {after} |")
    fixes = sum(t.fix for t in rows)
    alarmed = [p for p in problems if p[4] or p[2]]
    print(f"\ndetected problems (cause among the alarms) helped by a tried remedy: "
          f"{len(helped)}/{len(detected)} ({100 * len(helped) / max(len(detected), 1):.0f} %); "
          f"programs with any alarm helped: {sum(p[3] for p in alarmed)}/{len(alarmed)}; "
          f"trials: {len(rows)}, "
          f"improved {fixes}, no better {sum(t.verdict == 'no better' for t in rows)}, "
          f"worse {sum(t.verdict == 'worse' for t in rows)}, "
          f"not applied {sum(t.verdict == 'not applied' for t in rows)}; "
          f"fixes not shown by their numbers: {sum(not honest(t) for t in rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
