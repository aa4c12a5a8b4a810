"""A run killed mid-training and resumed with BackupAndRestore (issue 26, item 8).

The resumed process must go on counting batches where the killed one left
them: the bad batch at epoch 3, batch 0 of an 8-batch epoch is batch 24
(its quarantine folder `batch-00000024`), not a second `batch-00000000`.
"""

from __future__ import annotations

import contextlib
import json
import os

import keras
import numpy as np

import tfguard


class Killed(Exception):
    """Stands for the SIGKILL: the process ends at the start of an epoch."""


class KillAtEpoch(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise Killed(f"killed at the start of epoch {epoch}")


def _session(tmp_path, callbacks):
    """One training process: a fresh model, guarded, with the run's backup and quarantine."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)],
                             name="net")  # one name in both processes: one quarantine folder
    model.compile(optimizer="sgd", loss="mse")
    tfguard.guard(model, policy="skip", quarantine_dir=str(tmp_path / "q"), localize=False,
                  max_quarantined=10)
    x = np.ones((32, 3), "float32")
    x[0, 0] = np.nan  # batch 0 of every epoch is bad
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    with contextlib.suppress(Killed):
        model.fit(x, np.ones((32, 1), "float32"), batch_size=4, epochs=5, shuffle=False,
                  verbose=0, callbacks=[backup, *callbacks])
    return model


def test_a_resumed_run_continues_the_batch_count(tmp_path):
    first = _session(tmp_path, [KillAtEpoch(3)])
    assert [e.batch for e in tfguard.guard_events(first)] == [0, 8, 16]
    resumed = _session(tmp_path, [])
    events = tfguard.guard_events(resumed)
    assert [(e.batch, e.epoch, e.epoch_batch) for e in events] == [(24, 3, 0), (32, 4, 0)]
    folder = events[0].quarantine
    assert os.path.basename(folder) == "batch-00000024"
    with open(os.path.join(folder, "meta.json")) as handle:
        meta = json.load(handle)
    assert (meta["batch"], meta["epoch"], meta["epoch_batch"]) == (24, 3, 0)
    names = sorted(os.listdir(os.path.dirname(folder)))
    assert names == [f"batch-{b:08d}" for b in (0, 8, 16, 24, 32)]
