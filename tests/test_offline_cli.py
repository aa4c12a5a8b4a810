"""`tfguard diagnose / compare / report` on hostile input: names, paths, damaged files.

Every bad input gives one red `ERROR` line plus a hint and a non-zero exit
status, never a traceback; every text that comes from a file or a name is
shown literally (markup not interpreted, control characters escaped) and a
name holding a newline does not break a table.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

from tests.events.eventdata import scalar_event, write_framed
from tfguard._cli import main
from tfguard.events._records import MAX_RECORD_BYTES

HOSTILE_RUNS = {  # "/" makes folders: the run is shown as "markup/[bold]bold[/bold] [link=http:/..."
    "markup": "[bold]bold[/bold] [link=http://example.com]link[/link] [/]",
    "escape": "run\x1b]0;TITLE\x07\x1b[2J",
    "newline": "two\nlines",
}
BOX = "│┃|"


def _write_run(directory, final=0.3, tag_prefix=""):
    os.makedirs(directory, exist_ok=True)
    events = []
    for epoch in range(6):
        step = 10 * (epoch + 1)
        loss = 2.3 - (2.3 - final) * epoch / 5
        events += [scalar_event(f"{tag_prefix}train/loss", step, loss),
                   scalar_event(f"{tag_prefix}val/loss", step, loss),
                   scalar_event(f"{tag_prefix}val/accuracy", step, 1 - loss / 2.3)]
    write_framed(os.path.join(directory, "events.out.tfevents.1.host"), events)


def _one_error(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("ERROR ") and lines[1].startswith("hint: "), err
    assert "Traceback" not in err


MARKUP_SHOWN = "markup/[bold]bold[/bold] [link=http:/example.com]link[/link] [/]"


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "240")  # rich's width when not on a terminal


@pytest.fixture
def hostile_logdir(tmp_path):
    root = tmp_path / "runs" / "no[" / "]pe"  # the path holds `[/]`
    for folder, name in HOSTILE_RUNS.items():
        _write_run(root / folder / name)
    _write_run(root / "fine")
    return root


def _table_rows_line_up(out: str) -> None:
    """Every line of a table (between its borders) has the same width."""
    rows = [line for line in out.splitlines() if line[:1] in BOX]
    assert rows, out
    assert len({len(line) for line in rows}) == 1, out


def test_a_missing_path_with_markup_is_one_error_line(tmp_path, capsys):
    path = str(tmp_path / "runs" / "no[/]pe")
    for command in (["diagnose", path], ["compare", path], ["report", path, "-o", str(tmp_path / "r.html")]):
        status = main(command)
        captured = capsys.readouterr()
        assert status == 2
        _one_error(captured.err)
        assert "no[/]pe" in captured.err


def test_diagnose_shows_hostile_run_names_literally(hostile_logdir, capsys):
    main(["diagnose", str(hostile_logdir)])
    out = capsys.readouterr().out
    assert MARKUP_SHOWN in out
    assert "run\\x1b]0;TITLE\\x07\\x1b[2J" in out
    assert "two\\nlines" in out
    assert "\x1b" not in out and "\x07" not in out
    assert "\ntwo\n" not in out and "\nlines" not in out


def test_compare_table_survives_hostile_names(hostile_logdir, capsys):
    status = main(["compare", str(hostile_logdir), "--sort-by", "[bold]val/loss"])
    out = capsys.readouterr().out
    assert status == 0
    assert "two\\nlines" in out and "run\\x1b]0;TITLE\\x07" in out
    assert MARKUP_SHOWN in out and "best [bold]val/loss" in out
    assert "\x1b" not in out and "\x07" not in out
    _table_rows_line_up(out)


def test_diagnose_table_survives_a_newline_in_a_layer_name(tmp_path, capsys):
    run = tmp_path / "run"
    os.makedirs(run)
    events = []
    for step in range(1, 41):
        events += [scalar_event("grad_norm/dense\nevil", step, 1e3 * step),
                   scalar_event("grad_norm/out", step, 1.0)]
    for epoch in range(4):
        events.append(scalar_event("train/loss", 10 * (epoch + 1), 2.3))
    write_framed(str(run / "events.out.tfevents.1.h"), events)
    main(["diagnose", str(tmp_path)])
    out = capsys.readouterr().out
    assert "dense\\nevil" in out and "\nevil" not in out
    _table_rows_line_up(out)


def test_report_to_a_directory_is_one_error_line(hostile_logdir, tmp_path, capsys):
    status = main(["report", str(hostile_logdir), "-o", str(tmp_path)])
    captured = capsys.readouterr()
    assert status == 2
    _one_error(captured.err)
    assert "is a directory" in captured.err and "report.html" in captured.err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    status = main(["report", str(hostile_logdir), "-o", str(blocker / "r.html")])
    captured = capsys.readouterr()
    assert status == 2
    _one_error(captured.err)
    assert "Cannot write the HTML report" in captured.err


def test_report_names_the_file_literally(hostile_logdir, tmp_path, capsys):
    out_path = tmp_path / "a[/]b" / "r.html"
    assert main(["report", str(hostile_logdir), "-o", str(out_path)]) == 0
    assert f"report written: {out_path}" in capsys.readouterr().out
    page = out_path.read_text(encoding="utf-8")
    assert "[bold]bold[/bold]" in page and "\x1b" not in page and "run\\x1b]0;TITLE\\x07" in page


@pytest.mark.parametrize("content", [b"\0" * 4096, random.Random(3).randbytes(4096)],
                         ids=["zeros", "random"])
def test_a_file_damaged_from_its_first_byte_fails_the_command(tmp_path, capsys, content):
    _write_run(tmp_path / "good")
    bad = tmp_path / "bad" / "events.out.tfevents.1.h"
    bad.parent.mkdir()
    bad.write_bytes(content)
    status = main(["diagnose", str(tmp_path)])
    captured = capsys.readouterr()
    assert status == 2
    assert "run bad" in captured.out and "unreadable" in captured.out
    assert f"{bad} at offset 0" in captured.out
    _one_error(captured.err)
    assert f"{bad} at offset 0" in captured.err
    status = main(["diagnose", str(tmp_path), "--json"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert status == 2 and [r["run"] for r in report["runs"]] == ["bad", "good"]
    assert report["runs"][0]["notes"][0].startswith(f"damaged event file {bad} at offset 0")
    for command in (["compare", str(tmp_path)], ["report", str(tmp_path), "-o", str(tmp_path / "r.html")]):
        assert main(command) == 2
        _one_error(capsys.readouterr().err)


def test_a_cut_last_record_is_a_note_not_a_failure(tmp_path, capsys):
    _write_run(tmp_path / "run", final=0.2)
    path = tmp_path / "run" / "events.out.tfevents.1.host"
    path.write_bytes(path.read_bytes()[:-7])  # a writer killed mid-record
    status = main(["diagnose", str(tmp_path)])
    captured = capsys.readouterr()
    assert status == 0 and captured.err == ""
    assert "unfinished record" in captured.out and "damaged" not in captured.out


_HOSTILE_COMMAND = """
import sys, time
from tfguard._cli import main
began = time.perf_counter()
status = main(["diagnose", sys.argv[1], "--json"])
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print("RESULT", status, time.perf_counter() - began, peak_kb / 1000)
"""


def test_the_command_on_a_2gb_file_claiming_a_2gb_record_is_bounded(tmp_path):
    import struct

    from tfguard.events._records import masked_crc32c

    run = tmp_path / "run"
    run.mkdir()
    header = struct.pack("<Q", (2 << 30) - 16)
    with open(run / "events.out.tfevents.1.h", "wb") as f:
        f.write(header + struct.pack("<I", masked_crc32c(header)))
        f.truncate(2 << 30)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_HOSTILE_COMMAND), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    _, status, seconds, peak_mb = done.stdout.strip().splitlines()[-1].split()
    assert int(status) == 2 and float(seconds) < 5 and float(peak_mb) <= 300, done.stdout[-500:]
    assert "record too large" in done.stderr and str(MAX_RECORD_BYTES) in done.stderr
    _one_error(done.stderr)


@pytest.mark.parametrize("command,status", [("diagnose", 1), ("compare", 0), ("report", 0)])
def test_an_ascii_terminal_gets_ascii_not_a_crash(tmp_path, command, status):
    """Issue 26, item 9: `PYTHONIOENCODING=ascii` (some CI systems, `LC_ALL=C`) on ASCII logs."""
    _write_run(str(tmp_path / "logs" / "good"))
    events = [scalar_event("train/loss", 10 * e, 2.3) for e in range(1, 8)]
    events += [scalar_event("val/loss", 10 * e, float("nan")) for e in range(1, 8)]
    stuck = tmp_path / "logs" / "stuck-lr-0.001-batch-64-seed-1-with-a-long-name-rich-cuts"
    os.makedirs(stuck)
    write_framed(str(stuck / "events.out.tfevents.1.host"), events)
    argv = [command, str(tmp_path / "logs")]
    if command == "report":
        argv += ["-o", str(tmp_path / "report.html")]
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "COLUMNS": "60",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "tfguard", *argv], capture_output=True, env=env,
                          timeout=120)
    out, err = done.stdout.decode("ascii"), done.stderr.decode("ascii")  # raises if not ASCII
    assert done.returncode == status, out + err
    assert "Traceback" not in err and "UnicodeEncodeError" not in err
    if command == "diagnose":
        assert "stuck" in out and "nonfinite" in out and "->" in out and "---" in out
    if command == "compare":
        assert "good" in out and "stuck" in out


@pytest.mark.parametrize("argv", [["diagnose", "--json"], ["compare"], ["watch", "--once", "--json"]])
def test_output_to_a_closed_pipe_ends_quietly(tmp_path, argv):
    """`tfguard diagnose LOGDIR | head -0`: no "BrokenPipeError ... check the path", status 141."""
    for run in ("a", "b"):
        _write_run(tmp_path / "logs" / run)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command, *options = argv
    child = subprocess.Popen([sys.executable, "-m", "tfguard", command, str(tmp_path / "logs"),
                              *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    child.stdout.close()  # the reader is gone before the first line is written
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 141, err
    assert err == "", err
