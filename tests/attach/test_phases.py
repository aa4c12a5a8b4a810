"""Fits of one model after a second `compile` are phases of one run (issue 42, item 3).

Fine-tuning after transfer learning: the head trained on a frozen base,
then the whole model compiled again with a new optimizer and a lower
learning rate. Run through `tfguard run` and read back from the event
files: one run whose steps go on across the compile (the new optimizer
counts from 0), each phase named with its optimizer, learning rate and
trainable variables in `config/phases`, the `config/hparams` table, the
diagnosis and its summary, and the report's fits.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from tfguard.attach import run_script
from tfguard.diagnose import diagnose_logdir, render_terminal
from tfguard.events import read_run

from .loop_scripts import FINE_TUNE
from .scripts import write


def test_fine_tuning_after_a_second_compile_is_two_phases_of_one_run(tmp_path):
    result = run_script(write(tmp_path, FINE_TUNE, recompile=True), logdir=tmp_path / "runs")
    assert result.exit_code == 0, result.traceback
    assert [(f.run, f.phase) for f in result.fits] == [("transfer-fit1", 1), ("transfer-fit1", 2)]
    assert "phase 2 of its run starts at step 21" in result.fits[1].notes[0]
    (offline,) = diagnose_logdir(str(tmp_path / "runs"))
    phases = [(p["phase"], p["first_step"], p["optimizer"], p["learning_rate"], p["trainable_variables"],
               p["trainable_parameters"]) for p in offline.phases]
    assert phases == [(1, 1, "Adam", 0.01, 2, 330), (2, 21, "Adam", 0.0001, 4, 2410)]
    assert result.diagnoses[0].phases == offline.phases  # the live diagnosis says what the logs say
    # the steps go on across the compile: no point of the first phase is lost or written over
    run = read_run(result.fits[0].run_dir)
    assert run.scalars["train/loss"][0].tolist() == [10, 20, 30, 40]
    assert run.scalars["train/epoch"][2].tolist() == [0.0, 1.0, 2.0, 3.0]
    table = run.texts["config/hparams"][-1][2]
    assert "| phase 2 | from step 21: Adam, learning rate 0.0001, 4 trainable variables (2410 parameters) |" in table
    assert json.loads(run.texts["config/phases"][-1][2])[1]["learning_rate"] == 0.0001
    console = Console(record=True, width=160, file=io.StringIO())
    render_terminal([offline], console)
    assert "phase 1 from step 1: Adam, learning rate 0.01, 2 trainable variables (330 parameters)" in \
        console.export_text()
    report = json.loads(Path(result.report_path).read_text(encoding="utf-8"))
    assert [f["phase"] for f in report["fits"]] == [1, 2] and len(report["runs"][-1]["phases"]) == 2


def test_fits_without_a_second_compile_are_one_phase(tmp_path):
    result = run_script(write(tmp_path, FINE_TUNE, recompile=False), logdir=tmp_path / "runs")
    assert result.exit_code == 0, result.traceback
    assert [f.phase for f in result.fits] == [1, 1] and result.fits[1].notes == []
    (offline,) = diagnose_logdir(str(tmp_path / "runs"))
    assert offline.phases == [] and "config/phases" not in read_run(result.fits[0].run_dir).texts
    assert read_run(result.fits[0].run_dir).scalars["train/loss"][0].tolist() == [10, 20, 30, 40]
