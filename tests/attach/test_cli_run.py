"""`tfguard run SCRIPT [ARGS...]` end to end: in process through `main`, and as a real command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfguard._cli import main

from .scripts import ARGV, EXITS, HEALTHY, RAISES, write

TFGUARD = Path(sys.executable).with_name("tfguard")


def test_run_passes_options_to_tfguard_and_the_rest_to_the_script(tmp_path, capsys):
    script = write(tmp_path, ARGV, name="show.py")
    status = main(["run", "--logdir", str(tmp_path / "runs"), "--no-logger", str(script),
                   "--logdir", "theirs", "-h", "--", "x"])
    captured = capsys.readouterr()
    assert status == 0
    seen = json.loads(captured.out)  # stdout is the script's alone
    assert seen["argv"] == [str(script), "--logdir", "theirs", "-h", "--", "x"]
    assert seen["name"] == "__main__"
    assert "no fit() call was diagnosed" in captured.err
    assert (tmp_path / "runs" / "report.json").is_file()


def test_run_reports_a_healthy_script_and_writes_json_and_html(tmp_path, capsys):
    script = write(tmp_path, HEALTHY, epochs=2)
    report, html = tmp_path / "out" / "r.json", tmp_path / "out" / "r.html"
    status = main(["run", "--logdir", str(tmp_path / "runs"), "--report", str(report),
                   "--html", str(html), "--policy", "skip", str(script)])
    captured = capsys.readouterr()
    assert status == 0
    assert captured.out.startswith("SCRIPT-SAYS history keys")
    assert "digits_mlp-fit1" in captured.err and "exit status: 0" in captured.err
    doc = json.loads(report.read_text())
    assert doc["exit_code"] == 0 and doc["runs"][0]["run"] == "digits_mlp-fit1"
    assert html.read_text().startswith("<!DOCTYPE html>")


def test_run_prints_the_traceback_and_exits_1(tmp_path, capsys):
    script = write(tmp_path, RAISES)
    status = main(["run", "--logdir", str(tmp_path / "runs"), "--no-logger", str(script)])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("Traceback (most recent call last):\n")
    assert "ValueError: boom from the script\n" in err
    assert err.index("ValueError: boom") < err.index("tiny-fit1")  # then the diagnosis
    assert json.loads((tmp_path / "runs" / "report.json").read_text())["exit_code"] == 1


def test_a_missing_script_is_one_error_line(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.py")]) == 2
    assert capsys.readouterr().err.startswith("ERROR Received an invalid value for `path`")


@pytest.mark.slow  # a fresh process imports TensorFlow: about 10 s on 2 shared cores
@pytest.mark.skipif(not TFGUARD.exists(), reason="the tfguard console script is not installed")
def test_the_installed_command_passes_output_and_exit_status_through(tmp_path):
    script = write(tmp_path, EXITS, code=5)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [str(TFGUARD), "run", "--logdir", "runs", "--no-logger", "--quiet", str(script), "a", "b"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 5, done.stderr
    assert done.stdout == "SCRIPT-SAYS before exit\n"
    assert "tiny-fit1" in done.stderr and "exit status: 5" in done.stderr
    doc = json.loads((tmp_path / "runs" / "report.json").read_text())
    assert doc["exit_code"] == 5 and doc["script"]["argv"] == [str(script), "a", "b"]
