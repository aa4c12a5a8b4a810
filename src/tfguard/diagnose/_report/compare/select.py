"""Which runs of a sweep get their own section in the HTML report, up to `MAX_DETAILED_RUNS`.

A page with every run's curves grows with the sweep: 500 runs made a 47 MB
page in minutes. A log directory of more than `MAX_DETAILED_RUNS` runs gets
the comparison of all of them (one table row each, ranked) and the details
of the runs that matter, in this order until the cap is reached:

1. the best run and the worst run by the ranking metric (`sort_metric`);
2. the runs that did not complete (failed, out of memory, interrupted) or
   whose files are unreadable;
3. the runs with an error finding, then those with a warning, each group
   in ranking order.

The other runs (healthy, or with info findings only, past the cap) are
listed in the comparison and the index with their log folder, from which
`tfguard report FOLDER` makes their own page.

Example:

>>> from tfguard.diagnose import Signals, diagnose
>>> runs = [diagnose(Signals.from_arrays({"train/loss": (None, [1.0, 0.5 - i / 100])},
...                                      run=f"r{i}"), rules=["nonfinite"]) for i in range(5)]
>>> sorted(runs[i].run for i in detailed_runs(runs, limit=2))
['r0', 'r4']
>>> len(detailed_runs(runs, limit=20))
5
"""

from __future__ import annotations

from tfguard.diagnose._engine import Diagnosis
from tfguard.diagnose._report.compare.rank import compare_diagnoses
from tfguard.diagnose._report.compare.section import sort_metric
from tfguard.diagnose._report.terminal import unreadable

MAX_DETAILED_RUNS = 20
"""The most runs of one page shown with their curves and evidence (the rest: one table row)."""

_ENDED_BADLY = ("failed", "out_of_memory", "aborted")


def detailed_runs(diagnoses: list[Diagnosis], limit: int = MAX_DETAILED_RUNS) -> set[int]:
    """The positions in `diagnoses` of the runs to show in detail (all when there are few).

    Args:
        diagnoses: the runs' diagnoses.
        limit: the most runs shown in detail. Defaults to `MAX_DETAILED_RUNS`.

    Returns:
        A set of indexes into `diagnoses`, at most `limit` of them.
    """
    if len(diagnoses) <= limit:
        return set(range(len(diagnoses)))
    position = {d.run: i for i, d in enumerate(diagnoses)}
    rows = compare_diagnoses(diagnoses, sort_by=sort_metric(diagnoses))
    ranked = [position[r.run] for r in rows]
    valued = [position[r.run] for r in rows if r.sort_value is not None] or ranked
    wanted = [valued[0], valued[-1]]
    wanted += [i for i in ranked if diagnoses[i].status.get("state") in _ENDED_BADLY
               or unreadable(diagnoses[i])]
    wanted += [i for i in ranked if diagnoses[i].worst == "error"]
    wanted += [i for i in ranked if diagnoses[i].worst == "warning"]
    chosen: list[int] = []
    for i in wanted:
        if i not in chosen:
            chosen.append(i)
        if len(chosen) == limit:
            break
    return set(chosen)


__all__ = ["MAX_DETAILED_RUNS", "detailed_runs"]
