"""How a run ended, read back from its log (issue 26, item 2).

The Logger writes an end-of-training record (`run/status`) whenever training
ends; a log it started that lacks one after its last step was cut off
(SIGKILL, a crash, a run still going) and is "interrupted at step N", never
healthy. The SIGTERM and SIGKILL cases in real subprocesses are in
`tests/summary/test_lifecycle.py`.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfguard._cli import main
from tfguard.diagnose import diagnose_logdir
from tfguard.summary import Logger


class Crash(Exception):
    pass


class CrashAfterEpoch(keras.callbacks.Callback):
    """Another callback that ends the program outside the step, after the Logger saw the epoch."""

    def on_epoch_end(self, epoch, logs=None):
        if epoch == 1:
            raise Crash("the script's own callback failed")


def _fit(logdir, callbacks, epochs=3):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x = np.random.default_rng(0).random((40, 4)).astype("float32")
    model.fit(x, np.arange(40) % 3, batch_size=8, epochs=epochs, verbose=0, callbacks=callbacks)


def test_a_completed_run_carries_its_end_record_and_is_completed(tmp_path, capsys):
    logger = Logger(str(tmp_path), scalars_every=1, histograms_every=0)
    _fit(str(tmp_path), [logger])
    (diagnosis,) = diagnose_logdir(str(tmp_path))
    assert diagnosis.status["state"] == "completed"
    assert diagnosis.status["text"] == "training completed"


def test_a_log_cut_off_before_its_end_record_is_interrupted_not_healthy(tmp_path, capsys):
    logger = Logger(str(tmp_path), scalars_every=1, histograms_every=0)
    with pytest.raises(Crash):
        _fit(str(tmp_path), [logger, CrashAfterEpoch()])
    logger.flush()  # what a killed process leaves: everything up to its last flush, no end
    try:
        (diagnosis,) = diagnose_logdir(str(tmp_path))
        assert diagnosis.status["state"] == "aborted" and not diagnosis.healthy
        assert diagnosis.status["text"].startswith("training was interrupted at step 10: the log "
                                                   "ends without the Logger's end-of-training record")
        assert main(["diagnose", str(tmp_path)]) == 1
        out = capsys.readouterr().out
        assert "interrupted at step 10" in out and "healthy" not in out
        assert main(["compare", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert "interrupted" in out and "healthy" not in out
    finally:
        logger.close()  # the exit: an "aborted" end record
    (diagnosis,) = diagnose_logdir(str(tmp_path))
    assert diagnosis.status["state"] == "aborted" and not diagnosis.healthy
    assert diagnosis.status["text"] == "training was interrupted at step 10"


def test_a_second_fit_cut_off_after_a_completed_first_is_interrupted(tmp_path):
    logger = Logger(str(tmp_path), scalars_every=1, histograms_every=0, run_subdir=False)
    _fit(str(tmp_path), [logger], epochs=1)
    assert diagnose_logdir(str(tmp_path))[0].status["state"] == "completed"
    with pytest.raises(Crash):
        _fit(str(tmp_path), [logger, CrashAfterEpoch()])
    logger.flush()
    try:
        status = diagnose_logdir(str(tmp_path))[0].status
        assert status["state"] == "aborted" and status["step"] == 10
    finally:
        logger.close()
