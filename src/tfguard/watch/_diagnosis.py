"""Diagnose the runs that got new data, with `tfguard diagnose`'s normalization and rules.

The runs of a logdir are grouped in *families*: a run directory, or for the
stock Keras callback's layout the parent folder of `train/` and
`validation/` (`tfguard.diagnose.run_family`, the rule by which
`tfguard.diagnose.signals_from_runs` turns them into one run). When any
run of a family got new records, the whole family is normalized and
diagnosed again, with the public `tfguard.diagnose` functions, so a finding has the same id, words, onset and root cause as
`tfguard diagnose` gives on the same bytes. Families without new data are
not touched; families are diagnosed one at a time, so a poll's memory holds
one family's signals whatever the number of runs.

What is kept of a diagnosis is a `RunState` (findings, status, last step):
never the signals, whose arrays are views of the followers' buffers.

Example:

>>> RunState("lr_10", "tfguard", (), {"state": "healthy"}, False, 12, 1).last_step
12
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from tfguard.diagnose import Finding, Thresholds, diagnose, run_family, signals_from_runs
from tfguard.watch._logdir import LogdirFollower

__all__ = ["RunState", "diagnose_families"]

@dataclasses.dataclass(frozen=True)
class RunState:
    """What the watch keeps of one run's latest diagnosis.

    Args:
        run: the run's name, as `tfguard diagnose` names it.
        source: `"tfguard"` or `"keras"`.
        findings: the findings, root cause first (as `tfguard diagnose` lists them).
        status: the diagnosis status (`{"state", "text", ...}`).
        ended: whether the log holds the Logger's end-of-training record.
        last_step: the largest global step logged, or `None`.
        last_epoch: the largest 0-based epoch logged, or `None`.
    """

    run: str
    source: str
    findings: tuple[Finding, ...]
    status: dict
    ended: bool
    last_step: int | None
    last_epoch: int | None


def _last(arrays: Iterable[np.ndarray]) -> int | None:
    known = [int(a.max()) for a in arrays if len(a) and int(a.max()) >= 0]
    return max(known) if known else None


def diagnose_families(follower: LogdirFollower, families: Iterable[str], *, root_name: str,
                      thresholds: Thresholds | None = None) -> dict[str, list[RunState]]:
    """Diagnoses every run of the given families, as read so far.

    Args:
        follower: the logdir's follower.
        families: the families to diagnose (see `tfguard.diagnose.run_family`).
        root_name: the name of the logdir itself in reports.
        thresholds: the rules' thresholds. Defaults to `None` (the documented defaults).

    Returns:
        family -> the `RunState` of each run it holds now (maybe none).
    """
    wanted = set(families)
    groups: dict[str, list[str]] = {}
    for name in follower.names:
        if run_family(name) in wanted:
            groups.setdefault(run_family(name), []).append(name)
    out: dict[str, list[RunState]] = {fam: [] for fam in wanted}
    for fam, names in sorted(groups.items()):  # one family's values at a time
        for signals in signals_from_runs(follower.snapshot(names), root_name=root_name):
            d = diagnose(signals, thresholds=thresholds)
            out[fam].append(RunState(
                run=d.run, source=d.source, findings=tuple(d.findings), status=dict(d.status),
                ended=signals.status is not None,
                last_step=_last(s.steps for s in signals.scalars.values()),
                last_epoch=_last(s.epochs for s in signals.scalars.values())))
            del d, signals  # their arrays are views of the followers' buffers
    return out
