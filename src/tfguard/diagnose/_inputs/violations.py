"""`violations`: the firewall's violations of one run, each with what was done about it.

The logger writes each violation twice: a JSON record (`guard/records`: step,
batch, epoch, stage, where, check, counts, failed slots, action), which
the rules read, and a markdown line (`guard/events`) holding the full
message, which also says where the batch was quarantined and what the
replay localized. `violations` joins the two (by step, in the order
written) into one `Violation` per event, for the report. A run that only
has one of them (older logs, or a live diagnosis without event files) still
gets its violations, with what that source says.

Example:

>>> from tfguard.diagnose import Signals
>>> line = ("- step 4, **data**: x (skipped). x at batch 7 (epoch 1, batch 1 of the epoch) "
...         "failed check 'finite': 8 NaN of 256 values. The batch is saved in /q/batch-7. "
...         "First non-finite layer on replay: 'hidden' (output 0).")
>>> record = {"step": 4, "batch": 7, "epoch": 1, "stage": "data", "where": "x",
...           "check": "finite", "counts": {"nan": 8.0}, "failed": ["data: x"], "action": "skipped"}
>>> v, = violations(Signals(texts={"guard/events": [(4, line)]}, guard_events=[record]))
>>> v.batch, v.epoch, v.epoch_batch, v.quarantine, v.first_bad_layer
(7, 1, 1, '/q/batch-7', 'hidden')
"""

from __future__ import annotations

import dataclasses
import re

from tfguard import _tags
from tfguard.diagnose._inputs.signals import Signals

_LINE = re.compile(r"- step (-?\d+), \*\*([^*]*)\*\*: (.*?) \(([a-z]+)\)\. (.*)", re.S)
_POSITION = re.compile(r"at batch (\d+)(?: \(epoch (\d+)(?:, batch (\d+) of the epoch)?\))?")
_SAVED = re.compile(r"The batch is saved in (.+?)\.(?=\s|$)", re.S)
_NOT_SAVED = re.compile(r"the batch could not be saved in (.+?\))", re.S)
_LAYER = re.compile(r"First non-finite layer on replay: '(.+?)'")
_REPLAY = re.compile(r"(First non-finite layer on replay:.*|First op producing NaN/Inf:.*"
                     r"|First variable with a non-finite gradient:.*)", re.S)


@dataclasses.dataclass(frozen=True)
class Violation:
    """One step the firewall flagged.

    Args:
        step: the global step (the optimizer's iterations) when it was tried.
        batch: the 0-based index of the batch among all batches, or `None`.
        epoch: the 0-based epoch, or `None`.
        epoch_batch: the 0-based index of the batch in its epoch, or `None`.
        stage: the first stage that failed (`data`, `forward`,
            `loss`, `gradients`, `update`).
        where: the tensor, layer or variable.
        check: the check that failed (`finite`, `labels`, ...).
        action: what was done: `skipped`, `warned` or `raised`.
        counts: the numbers behind it (`nan`, `posinf`, `bad`, `total`, ...).
        failed: every failed slot, `"stage: where"`.
        quarantine: the folder the batch was saved in, or `None`.
        quarantine_error: why it could not be saved, or `None`.
        first_bad_layer: the first non-finite layer on replay, or `None`.
        replay: what the replay localized, in words, or `None`.
        message: the firewall's full message, or `""`.
    """

    step: int
    batch: int | None = None
    epoch: int | None = None
    epoch_batch: int | None = None
    stage: str = ""
    where: str = ""
    check: str = ""
    action: str = ""
    counts: dict = dataclasses.field(default_factory=dict)
    failed: tuple = ()
    quarantine: str | None = None
    quarantine_error: str | None = None
    first_bad_layer: str | None = None
    replay: str | None = None
    message: str = ""

    def counts_text(self) -> str:
        """The non-finite counts in words, e.g. `"8 NaN, 0 +Inf, 0 -Inf of 256"`, or the raw counts."""
        c = self.counts
        if {"nan", "posinf", "neginf"} <= set(c):
            text = f"{_int(c['nan'])} NaN, {_int(c['posinf'])} +Inf, {_int(c['neginf'])} -Inf"
            return text + (f" of {_int(c['total'])}" if "total" in c else "")
        return ", ".join(f"{k}={_int(v)}" for k, v in c.items())


def _int(value) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _optional_int(value) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _from_line(step: int, text: str) -> dict:
    found = _LINE.match((text or "").strip())
    if not found:
        return {"step": step, "message": str(text or "")}
    _step, stage, where, action, message = found.groups()
    out = {"step": int(_step), "stage": stage, "where": where, "action": action,
           "message": message}
    position = _POSITION.search(message)
    if position:
        out["batch"], out["epoch"], out["epoch_batch"] = (_optional_int(g) for g in position.groups())
    saved = _SAVED.search(message)
    out["quarantine"] = saved.group(1) if saved else None
    failed = _NOT_SAVED.search(message)
    out["quarantine_error"] = failed.group(1) if failed else None
    layer = _LAYER.search(message)
    out["first_bad_layer"] = layer.group(1) if layer else None
    replay = _REPLAY.search(message)
    out["replay"] = " ".join(replay.group(1).split()) if replay else None
    return out


def violations(signals: Signals) -> list[Violation]:
    """The firewall's violations of a run, oldest first (see the module docstring).

    Args:
        signals: the run (its `guard_events` and its `guard/events` texts).

    Returns:
        One `Violation` per event, sorted by step.
    """
    lines: dict[int, list[dict]] = {}
    for step, text in signals.texts.get(_tags.GUARD_EVENTS, []):
        parsed = _from_line(int(step), text)
        lines.setdefault(parsed["step"], []).append(parsed)
    out = []
    for record in signals.guard_events:
        step = int(record.get("step", 0) or 0)
        line = lines[step].pop(0) if lines.get(step) else {}
        merged = {**line, **{k: v for k, v in record.items() if v not in (None, "", [], {})}}
        merged.setdefault("epoch_batch", line.get("epoch_batch"))
        out.append(merged)
    out += [line for rest in lines.values() for line in rest]  # lines without a record
    fields = {f.name for f in dataclasses.fields(Violation)}
    result = []
    for item in out:
        item = {k: v for k, v in item.items() if k in fields}
        item["failed"] = tuple(item.get("failed") or ())
        item["counts"] = dict(item.get("counts") or {})
        for key in ("batch", "epoch", "epoch_batch"):
            item[key] = _optional_int(item.get(key))
        result.append(Violation(**item))
    return sorted(result, key=lambda v: (v.step, v.batch if v.batch is not None else -1))


def counted(signals: Signals) -> int | None:
    """The logger's own count of violations (`guard/violations`, cumulative), or `None`."""
    s = signals.series(_tags.GUARD_VIOLATIONS)
    return None if s is None else int(s.values[-1])
