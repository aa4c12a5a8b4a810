"""What the tab's routes answer: the diagnoses as the JSON of `tfguard diagnose --json`, and more.

Each run is the run of the `tfguard.report/1` document (`to_json`: status,
hparams, metrics, findings root cause first with evidence, layer, onset
and fix), plus what the HTML report adds: a one-line headline in the
words of the terminal report, the firewall's violations with their
quarantine folder and replay result (`violations`). (The tried fixes of
`tfguard run --try-fixes` come from `tfguard.board._reports`.)
The ranking is `compare_diagnoses`'s, by the first of `SORT_KEYS` that a run has.

Example:

>>> from tfguard.diagnose import Signals, diagnose
>>> d = diagnose(Signals.from_arrays({"train/loss": (None, [1.0, float("nan")])}, run="a"))
>>> view = run_view(d)
>>> view["run"], view["kind"], view["symptoms"][0]["id"]
('a', 'error', 'nonfinite')
"""

from __future__ import annotations

import dataclasses
import time

from tfguard import _tags
from tfguard._findings import strict_json
from tfguard._findings_table import count_text
from tfguard.diagnose import Diagnosis, Thresholds, compare_diagnoses, to_json, violations
from tfguard.diagnose._rules.spikes import spikes_of

MAX_VIOLATIONS = 200
"""The most violations one run's answer lists (the count says how many there were)."""

MAX_CURVE_POINTS = 400
"""The most points of the loss drawn under a run's violations (evenly strided, the last kept)."""

SORT_KEYS = ("val/accuracy", "val/loss", "train/accuracy", "train/loss")
"""The ranking metric: the first of these that some run logged."""

def headline(d: Diagnosis) -> tuple[str, str]:
    """`(kind, text)`: how the run ended or what was found, in the terminal report's words.

    `kind` is `healthy`, a severity (`error`, `warning`, `info`) or a state
    that is not `completed` (`failed`, `out_of_memory`, `aborted`,
    `no_evidence`, `little_evidence`). A run of little evidence with an
    error or a warning is of that severity: what was found outranks what
    could not be looked at.

    Example:

    >>> from tfguard.diagnose import Diagnosis
    >>> headline(Diagnosis(run="a"))
    ('healthy', 'healthy: no symptom found')
    """
    state = d.status.get("state", "completed")
    if state == "little_evidence" and d.worst in ("error", "warning"):
        # what was found outranks what could not be looked at
        return d.worst, f"{count_text(d.findings).plain}; {d.status.get('text', state)}"
    if state != "completed":
        return state, str(d.status.get("text", state))
    if d.worst is None:
        return "healthy", "healthy: no symptom found"
    return d.worst, count_text(d.findings).plain


def _violations(d: Diagnosis) -> tuple[list[dict], int]:
    if d.signals is None:
        return [], 0
    found = violations(d.signals)
    rows = []
    for v in found[:MAX_VIOLATIONS]:
        row = dataclasses.asdict(v)
        row["failed"] = list(v.failed)
        row["values"] = v.counts_text()
        rows.append(strict_json(row))
    return rows, len(found)


def loss_curve(d: Diagnosis) -> dict | None:
    """The loss the violations are drawn on (per batch, else per epoch), as the HTML report draws it.

    Returns:
        `{"tag", "steps", "values"}` with at most `MAX_CURVE_POINTS` points
        (non-finite values as `"NaN"` / `"Infinity"`), or `None` when the
        run has no loss with known steps.

    Example:

    >>> from tfguard.diagnose import Signals, diagnose
    >>> d = diagnose(Signals.from_arrays({"batch/loss": ([1, 2, 3], [0.9, float("nan"), 0.7])}))
    >>> loss_curve(d)
    {'tag': 'batch/loss', 'steps': [1, 2, 3], 'values': [0.9, 'NaN', 0.7]}
    """
    if d.signals is None:
        return None
    for tag in (_tags.batch("loss"), _tags.train("loss")):
        series = d.signals.series(tag)
        if series is None or not series.has_steps:
            continue
        stride = max(1, -(-len(series) // MAX_CURVE_POINTS))
        index = list(range(0, len(series), stride))
        if index[-1] != len(series) - 1:
            index.append(len(series) - 1)
        return strict_json({"tag": tag, "steps": [int(series.steps[i]) for i in index],
                            "values": [float(series.values[i]) for i in index]})
    return None


def spike_marks(d: Diagnosis) -> list[dict]:
    """The loss spikes of a run with a `loss_spike` finding, as the timeline marks them: step, value, what was done.

    Example:

    >>> from tfguard.diagnose import Signals, diagnose
    >>> record = {"step": 7, "stage": "spike", "where": "loss", "check": "spike", "action": "skipped",
    ...           "counts": {"value": 9.5, "mean": 1.0, "std": 0.2, "threshold": 2.2}}
    >>> spike_marks(diagnose(Signals(guard_events=[record])))
    [{'step': 7, 'value': 9.5, 'action': 'skipped'}]
    """
    if d.signals is None or not d.by_id("loss_spike"):
        return []
    spikes, _, _ = spikes_of(d.signals, Thresholds())
    return strict_json([{"step": int(s["step"]), "value": s["value"], "action": s["action"]} for s in spikes])


def run_view(d: Diagnosis, *, updated: float | None = None, now: float | None = None) -> dict:
    """One run as the tab shows it: the `tfguard.report/1` run, its headline and its violations.

    Args:
        d: the run's diagnosis.
        updated: when its newest event file was written (seconds since the
            epoch). Defaults to `None` (unknown).
        now: the time to measure the age of its last write from. Defaults to
            `None` (`time.time()`).

    Returns:
        The run of `to_json`, plus `kind`, `headline`, `violations`
        (at most `MAX_VIOLATIONS`), `violation_count`, `spikes` (the loss
        spikes, `spike_marks`), `loss` (the curve the violations and spikes
        are drawn on, `loss_curve`), `ended` (True when
        tfguard's Logger wrote how the run ended, False when it has not
        yet, `None` for logs that never say: Keras's callback), `updated`
        (the mtime of its newest event file) and `age_s` (seconds since).
    """
    (view,) = to_json([d])["runs"]
    view["kind"], view["headline"] = headline(d)
    view["violations"], view["violation_count"] = _violations(d)
    view["spikes"] = spike_marks(d)
    view["loss"] = loss_curve(d) if view["violations"] or view["spikes"] else None
    view["updated"] = updated
    ended = getattr(d.signals, "status", None) is not None if d.signals is not None else False
    view["ended"] = True if ended else (False if d.source == "tfguard" else None)
    now = time.time() if now is None else now
    view["age_s"] = None if view["updated"] is None else max(0.0, now - view["updated"])
    return view


def sort_key(diagnoses: list[Diagnosis]) -> str:
    """The first of `SORT_KEYS` that some run logged (`val/accuracy` when none did)."""
    for key in SORT_KEYS:
        if any(key in d.metrics for d in diagnoses):
            return key
    return SORT_KEYS[0]


def ranking(diagnoses: list[Diagnosis], sort_by: str | None = None) -> dict:
    """The ranked comparison of `tfguard compare`: `{"sort_by", "rows"}`, one row per run, best first."""
    sort_by = sort_by or sort_key(diagnoses)
    rows = []
    for row in compare_diagnoses(diagnoses, sort_by=sort_by):
        item = row.to_dict()
        item["summary"] = row.summary()
        rows.append(item)
    return {"sort_by": sort_by, "rows": strict_json(rows)}


__all__ = ["MAX_CURVE_POINTS", "MAX_VIOLATIONS", "SORT_KEYS", "headline", "loss_curve", "ranking", "run_view",
           "sort_key", "spike_marks"]
