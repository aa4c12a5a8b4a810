"""`sys.exit(0)` inside a callback of an attached script (issue 26, item 11).

Exit status 0 is a successful stop: the run is reported completed, not
"training failed ... SystemExit: 0", and the epoch the callback ended is
logged. `sys.exit(3)` in the same place stays a failure with status 3.
"""

from __future__ import annotations

from tfguard.attach import run_script
from tfguard.diagnose import diagnose_logdir
from tfguard.events._run import read_run

from .scripts import EXITS_IN_CALLBACK, write


def test_sys_exit_0_in_a_callback_is_a_completed_run_with_its_last_epoch(tmp_path, capsys):
    script = write(tmp_path, EXITS_IN_CALLBACK, code=0)
    result = run_script(script, logdir=tmp_path / "runs")
    out = capsys.readouterr().out
    assert "SCRIPT-SAYS enough at epoch 1" in out and "never here" not in out
    assert result.exit_code == 0 and result.exception is None
    (fit,) = result.fits
    assert fit.error is None
    assert any("sys.exit(0) in a callback at the end of epoch 1: a successful stop" in n
               for n in fit.notes)
    (live,) = result.diagnoses
    assert live.status["state"] == "completed", live.status
    run = read_run(fit.run_dir, tags=["train/loss"], kinds="scalars")
    steps, _wall, _values = run.scalars["train/loss"]
    assert list(steps) == [10, 20]  # epochs 0 and 1 (10 batches each): the ended epoch is logged
    (offline,) = diagnose_logdir(str(tmp_path / "runs"))
    assert offline.status["state"] == "completed", offline.status


def test_sys_exit_3_in_a_callback_stays_a_failure(tmp_path):
    script = write(tmp_path, EXITS_IN_CALLBACK, code=3)
    result = run_script(script, logdir=tmp_path / "runs")
    assert result.exit_code == 3
    (fit,) = result.fits
    assert fit.error == "SystemExit: 3"
    assert result.diagnoses[0].status["state"] == "failed"
