"""Texts crafted into an event file do not break the reading of a logdir (issue 46, item 5).

`config/model` nested past the JSON parser's limit, or a `guard/records`
line whose fields have other types than the Logger writes, is left out of
that run's signals; the run and every other run are still diagnosed.
"""

from __future__ import annotations

import json

from tests.watch.logs import EVENT_FILE, append, epoch_records, losses, text
from tfguard.diagnose import diagnose_logdir, load_signals


def _run(path, tag: str, body: str) -> None:
    append(path / EVENT_FILE, text(tag, 1, body))
    for epoch, loss in enumerate(losses(6, nan_at=4)):
        append(path / EVENT_FILE, epoch_records(epoch, loss))


def test_json_nested_past_the_parser_limit_is_left_out(tmp_path):
    _run(tmp_path / "deep", "config/model", "[" * 100_000 + "]" * 100_000)
    _run(tmp_path / "plain", "config/model", json.dumps({"name": "m", "layers": []}))
    [deep, plain] = load_signals(tmp_path)
    assert deep.model is None and plain.model == {"name": "m", "layers": []}
    assert [d.ids for d in diagnose_logdir(tmp_path)] == [["nonfinite"], ["nonfinite"]]


def test_a_guard_record_of_other_types_is_left_out(tmp_path):
    good = {"step": 3, "batch": 2, "epoch": 0, "stage": "data", "where": "x", "check": "finite",
            "counts": {"nan": 1}, "failed": ["data: x"], "action": "skipped"}
    for bad in ({"step": "x"}, {"counts": 5}, {"failed": 5}, {"step": 4, "batch": "two"}):
        append(tmp_path / "run" / EVENT_FILE, text("guard/records", 1, json.dumps(bad)))
    _run(tmp_path / "run", "guard/records", json.dumps(good))
    [signals] = load_signals(tmp_path)
    assert [(e["step"], e["batch"]) for e in signals.guard_events] == [(4, None), (3, 2)]
    assert diagnose_logdir(tmp_path)[0].ids[0] == "bad_record"  # a data check's violation is the record's
