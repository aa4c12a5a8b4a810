"""`compare_logdir`: one row per run (hparams, best and final metrics, symptoms), ranked.

Made for a hyperparameter sweep: every run of a log directory is diagnosed
and summarized in a `CompareRow`; rows are ranked by the best value of one
metric (highest first for accuracy-like metrics, lowest first for loss-like
ones), and runs that lack that metric come last. `render_compare` prints the
rows as a rich table, with the hparams that differ between runs as columns;
run names, hparam names and values are shown literally, one line per cell
(`clean`: no markup, control characters and newlines escaped).

Example:

>>> import tempfile
>>> import tensorflow as tf
>>> from tfguard.diagnose import compare_logdir
>>> logdir = tempfile.mkdtemp()
>>> for name, acc in (("a", 0.8), ("b", 0.9)):
...     with tf.summary.create_file_writer(f"{logdir}/{name}").as_default():
...         _ = tf.summary.scalar("val/accuracy", acc, step=1)
>>> [row.run for row in compare_logdir(logdir)]
['b', 'a']
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfguard import _tags
from tfguard._findings import fmt
from tfguard._findings_table import SEVERITY_STYLES
from tfguard.diagnose._engine import Diagnosis, lower_is_better
from tfguard.diagnose._offline import diagnose_logdir
from tfguard.diagnose._report.terminal import clean
from tfguard.diagnose._thresholds import Thresholds


@dataclasses.dataclass
class CompareRow:
    """One run in a comparison.

    Args:
        run: the run's name.
        hparams: its hyperparameters.
        best: tag -> best value over epochs.
        final: tag -> last value.
        findings: the symptom ids found.
        worst: the worst severity found, or `None`.
        sort_value: the best value of the ranking metric, or `None`.
        rank: 1-based rank (runs without the metric are ranked last).
        state: how the run ended (`Diagnosis.status["state"]`): a run that
            failed or was interrupted is never shown as healthy. Defaults to
            `"completed"`.
    """

    run: str
    hparams: dict
    best: dict
    final: dict
    findings: list
    worst: str | None
    sort_value: float | None = None
    rank: int = 0
    state: str = "completed"

    def summary(self) -> str:
        """The symptoms cell: the ids, else `healthy`, after how the run ended if not completed."""
        ended = {"aborted": "interrupted", "out_of_memory": "out of memory"}.get(self.state,
                                                                                 self.state)
        found = ", ".join(self.findings)
        if self.state in ("completed", "no_evidence"):
            return found or ("healthy" if self.state == "completed" else "no evidence")
        return f"{ended}: {found}" if found else ended

    def to_dict(self) -> dict:
        """The row as a JSON-ready dict."""
        return dataclasses.asdict(self)


FINAL_METRICS = (_tags.train("loss"), _tags.val("loss"), _tags.train("accuracy"), _tags.val("accuracy"))
"""The metrics a comparison shows the final value of, when a run has them."""
DEFAULT_SORT = _tags.val("accuracy")


def compare_diagnoses(diagnoses: Iterable[Diagnosis], sort_by: str = DEFAULT_SORT) -> list[CompareRow]:
    """Ranks already computed diagnoses (see `compare_logdir`).

    Args:
        diagnoses: the runs' diagnoses.
        sort_by: the metric tag to rank by. Defaults to `"val/accuracy"`.

    Returns:
        The rows, best first.
    """
    rows = []
    for d in diagnoses:
        best = {t: m["best"] for t, m in d.metrics.items()}
        final = {t: m["final"] for t, m in d.metrics.items()}
        rows.append(CompareRow(d.run, dict(d.hparams), best, final, d.ids, d.worst,
                               sort_value=best.get(sort_by),
                               state=str(d.status.get("state", "completed"))))
    sign = 1.0 if lower_is_better(sort_by) else -1.0
    rows.sort(key=lambda r: (r.sort_value is None, sign * (r.sort_value or 0.0), r.run))
    for i, row in enumerate(rows, start=1):
        row.rank = i
    return rows


def compare_logdir(
    logdir: str | os.PathLike,
    sort_by: str = DEFAULT_SORT,
    *,
    thresholds: Thresholds | Mapping | None = None,
    reader: Callable | None = None,
    damage: list | None = None,
) -> list[CompareRow]:
    """Diagnoses every run under `logdir` and ranks them by `sort_by`.

    Args:
        logdir: the folder TensorBoard would be pointed at.
        sort_by: the metric tag to rank by, e.g. `"val/loss"`. Defaults to `"val/accuracy"`.
        thresholds: a `Thresholds` or a mapping of overrides. Defaults to `None`.
        reader: a function like `tfguard.events.read_logdir`. Defaults to `None`.
        damage: a list that receives every `tfguard.events.Damage` found
            in the files. Defaults to `None`.

    Returns:
        One `CompareRow` per run, best first.

    Raises:
        EventFileError: if `logdir` does not exist or is not a directory.
    """
    diagnoses = diagnose_logdir(logdir, thresholds=thresholds, reader=reader, damage=damage,
                                keep_signals=False)
    return compare_diagnoses(diagnoses, sort_by=sort_by)


def render_compare(rows: Iterable[CompareRow], console: Console, *, sort_by: str | None = None,
                   max_hparams: int = 6) -> None:
    """Prints comparison rows as a table on `console`.

    Args:
        rows: the rows of `compare_logdir`.
        console: the rich console to print on.
        sort_by: the ranking metric, for the column title. Defaults to `None`
            (no ranking column).
        max_hparams: the most hparam columns shown (those that differ first).
            Defaults to `6`.
    """
    rows = list(rows)
    if not rows:
        console.print(Text("no runs found", style="yellow"))
        return
    keys = list(dict.fromkeys(k for r in rows for k in r.hparams))
    varying = [k for k in keys if len({str(r.hparams.get(k)) for r in rows}) > 1]
    shown = (varying + [k for k in keys if k not in varying])[:max_hparams]
    metrics = [t for t in FINAL_METRICS
               if any(t in r.final for r in rows)]
    table = Table(show_header=True, header_style="bold")
    table.add_column("#", justify="right")
    table.add_column("run", no_wrap=True)
    for k in shown:  # names from the logs: Text headers, never markup
        table.add_column(Text(clean(k, 30)), overflow="fold")
    if sort_by:
        table.add_column(Text(f"best {clean(sort_by, 40)}"), justify="right")
    for t in metrics:
        table.add_column(Text(f"final {t}"), justify="right")
    table.add_column("symptoms", overflow="fold", min_width=14)
    for r in rows:
        cells = [Text(str(r.rank)), Text(clean(r.run, 80), style="magenta")]
        cells += [Text(clean(r.hparams.get(k, "-"), 40)) for k in shown]
        if sort_by:
            cells.append(Text(fmt(r.sort_value) if r.sort_value is not None else "-"))
        cells += [Text(fmt(r.final[t]) if t in r.final else "-") for t in metrics]
        healthy = r.worst is None and r.state == "completed"
        style = "green" if healthy else SEVERITY_STYLES.get(r.worst or "error", "red")
        cells.append(Text(r.summary(), style=style))
        table.add_row(*cells)
    console.print(table)
