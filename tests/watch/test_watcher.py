"""The watch of a logdir, poll by poll: new runs and files, findings said once, as diagnose finds them."""

from __future__ import annotations

import io
import json
import os

import pytest

from tests.watch.logs import (
    EVENT_FILE,
    append,
    epoch_records,
    keras_epoch,
    losses,
    model_text,
    scalar,
)
from tfguard._errors import ContractError
from tfguard.diagnose import diagnose_logdir
from tfguard.events._collect import MAX_TAGS
from tfguard.watch import JsonLinesOutput, Watcher, watch_logdir


def _first_per_key(findings) -> dict:
    out = {}
    for f in findings:
        out.setdefault(f.key, (f.severity, f.onset_step, f.onset_epoch))
    return out


def _open(watcher: Watcher) -> dict:
    return {run: {key: (f.severity, f.onset_step, f.onset_epoch) for key, f in found.items()}
            for run, found in watcher.stream.open.items() if found}


def _diagnosed(logdir) -> dict:
    return {d.run: _first_per_key(d.findings) for d in diagnose_logdir(logdir) if d.findings}


def test_runs_and_files_that_appear_are_picked_up_in_both_layouts(tmp_path):
    logdir = tmp_path / "runs"
    watcher = Watcher(logdir)
    with pytest.raises(Exception, match="does not exist"):
        watcher.poll()
    logdir.mkdir()
    assert watcher.poll() == []
    append(logdir / "lr_10" / EVENT_FILE, model_text() + epoch_records(0, 2.3))
    assert [(e.kind, e.run) for e in watcher.poll()] == [("run", "lr_10")]
    # the job is resumed: a new writer starts a new file with a later timestamp
    later = logdir / "lr_10" / EVENT_FILE.replace("1700000000", "1700000500")
    append(later, b"".join(epoch_records(e, loss) for e, loss in enumerate(losses(8, nan_at=4))
                           if e >= 1))
    events = watcher.poll()
    assert [(e.kind, e.run, e.finding.id, e.step) for e in events] == [
        ("finding", "lr_10", "nonfinite", 41)]
    for epoch in range(5):  # the stock Keras callback's layout, a flat loss
        keras_epoch(logdir / "keras_run", epoch, 2.3, 2.3)
    events = watcher.poll()
    assert [(e.kind, e.run) for e in events] == [("run", "keras_run"), ("finding", "keras_run")]
    assert events[1].finding.id == "no_learning"
    assert _open(watcher) == _diagnosed(logdir)


def test_each_finding_is_said_once_and_once_more_when_it_goes_away(tmp_path):
    path = tmp_path / "plateau" / EVENT_FILE
    watcher = Watcher(tmp_path)
    said = []
    curve = [2.3] * 6 + [2.3 * 0.7 ** k for k in range(1, 10)]
    for epoch, loss in enumerate(curve):
        append(path, epoch_records(epoch, loss))
        said += [(epoch, e.kind, e.finding.id if e.finding else None) for e in watcher.poll()]
        said += [(epoch, e.kind, None) for e in watcher.poll()]  # a look with nothing new
    kinds = [(kind, symptom) for _epoch, kind, symptom in said]
    assert kinds == [("run", None), ("finding", "no_learning"), ("resolved", "no_learning")]
    found_at = next(epoch for epoch, kind, _ in said if kind == "finding")
    assert found_at == 3  # the first epoch whose log shows a flat loss over enough epochs
    assert _open(watcher) == _diagnosed(tmp_path) == {}


def test_a_finding_is_reported_at_the_step_diagnose_finds_on_the_finished_file(tmp_path):
    watcher = Watcher(tmp_path)
    steps = {}
    for epoch, loss in enumerate(losses(12, nan_at=7)):
        append(tmp_path / "lr_10" / EVENT_FILE, epoch_records(epoch, loss))
        append(tmp_path / "healthy" / EVENT_FILE, epoch_records(epoch, 2.3 * 0.7 ** epoch))
        for event in watcher.poll():
            if event.kind == "finding":
                steps[(event.run, event.finding.id)] = event.step
    finished = diagnose_logdir(tmp_path)
    assert {(d.run, f.id): f.onset_step for d in finished for f in d.findings} == steps
    assert steps == {("lr_10", "nonfinite"): 71}


def test_watch_logdir_stops_at_the_first_error_with_status_1_and_json_lines_parse(tmp_path):
    for epoch, loss in enumerate(losses(8, nan_at=5)):
        append(tmp_path / "lr_10" / EVENT_FILE, epoch_records(epoch, loss))
    stream = io.StringIO()
    result = watch_logdir(tmp_path, exit_on="error", outputs=[JsonLinesOutput(stream)],
                          interval=0.01, max_polls=50)
    assert (result.exit_code, result.reason, result.polls) == (1, "exit_on", 1)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["run", "finding", "summary"]
    assert lines[1]["finding"]["id"] == "nonfinite" and lines[1]["step"] == 51
    assert lines[-1]["exit_code"] == 1 and lines[-1]["bytes_read"] == os.path.getsize(
        tmp_path / "lr_10" / EVENT_FILE)
    healthy = tmp_path / "healthy"
    for epoch in range(8):
        append(healthy / "h" / EVENT_FILE, epoch_records(epoch, 2.3 * 0.7 ** epoch))
    assert watch_logdir(healthy, exit_on="warning", once=True).exit_code == 0
    assert watch_logdir(healthy, interval=0.01, max_polls=3).reason == "polls"


@pytest.mark.parametrize("options, message", [
    ({"interval": 0}, "`interval`"), ({"exit_on": "info"}, "`exit_on`"),
    ({"settle": -1}, "`settle`")])
def test_bad_options_say_what_was_expected(tmp_path, options, message):
    with pytest.raises(ContractError, match=message):
        watch_logdir(tmp_path, once=True, **options)


def test_a_poll_reads_only_the_run_that_grew_and_damage_is_said_in_diagnose_words(tmp_path):
    for run in ("a", "b"):
        append(tmp_path / run / EVENT_FILE, b"".join(epoch_records(e, 2.3 * 0.7 ** e)
                                                     for e in range(4)))
    watcher = Watcher(tmp_path, settle=60)
    watcher.poll()
    more = epoch_records(4, 0.5)
    append(tmp_path / "b" / EVENT_FILE, more + more[:30])  # and the writer was cut mid-record
    before = watcher.counter.total
    assert [e.kind for e in watcher.poll()] == []  # the cut record may still be completed
    assert watcher.counter.total - before == len(more) + 30
    old = os.path.getmtime(tmp_path / "b" / EVENT_FILE) - 600
    os.utime(tmp_path / "b" / EVENT_FILE, (old, old))  # ... it never was: the file stopped
    (event,) = watcher.poll()
    assert (event.kind, event.run, event.severity) == ("damage", "b", "warning")
    (diagnosed,) = [d for d in diagnose_logdir(tmp_path) if d.run == "b"]
    assert diagnosed.notes == [event.text]
    assert event.detail["kind"] == "truncated" and watcher.poll() == []


def test_tags_past_the_readers_cap_are_said_once_however_many_polls_add_more(tmp_path):
    path = tmp_path / "many" / EVENT_FILE
    append(path, b"".join(scalar(f"t/{i}", 1, 0.5) for i in range(MAX_TAGS + 10)))
    watcher = Watcher(tmp_path)
    said = watcher.poll()
    append(path, b"".join(scalar(f"u/{i}", 2, 0.5) for i in range(20)))
    said += watcher.poll() + watcher.poll()
    damage = [e for e in said if e.kind == "damage"]
    assert len(damage) == 1 and damage[0].detail["kind"] == "oversized"
    assert "distinct tags" in damage[0].text


def test_a_deleted_run_is_said_removed_and_its_findings_are_no_longer_open(tmp_path):
    import shutil

    for epoch, loss in enumerate(losses(6, nan_at=3)):
        append(tmp_path / "lr_10" / EVENT_FILE, epoch_records(epoch, loss))
        append(tmp_path / "lr_0.01" / EVENT_FILE, epoch_records(epoch, 2.3 * 0.7 ** epoch))
    watcher = Watcher(tmp_path)
    assert ("finding", "lr_10") in [(e.kind, e.run) for e in watcher.poll()]
    assert watcher.stream.counts()["error"] == 1
    shutil.rmtree(tmp_path / "lr_10")
    [removed] = watcher.poll()
    assert (removed.kind, removed.run) == ("removed", "lr_10")
    assert removed.text == "run folder removed: 1 open finding(s) closed"
    assert watcher.stream.counts() == {"error": 0, "warning": 0, "info": 0}
    assert watcher.stream.resolved == 0 and watcher.poll() == []
    result = watch_logdir(tmp_path, once=True)
    assert result.open["error"] == 0 and result.runs == 1


def test_a_damaged_file_rotated_to_old_is_not_reported_again(tmp_path):
    run = tmp_path / "run"
    records = b"".join(epoch_records(e, 2.3 * 0.7 ** e) for e in range(3))
    broken = bytearray(records)
    broken[100] ^= 0xFF  # a flipped byte inside the second record: data lost there
    append(run / EVENT_FILE, bytes(broken))
    watcher = Watcher(tmp_path, settle=0)
    assert [e.kind for e in watcher.poll()].count("damage") == 1
    os.rename(run / EVENT_FILE, run / (EVENT_FILE + ".old"))  # the writer rotates its file
    append(run / EVENT_FILE.replace("1700000000", "1700000900"), epoch_records(3, 0.5))
    assert [e.kind for e in watcher.poll()].count("damage") == 0
