"""`tfguard run --try-fixes SCRIPT` end to end, in process through `main`, on a real script file."""

from __future__ import annotations

import json

from tfguard._cli import main
from tfguard.events import find_runs

SCRIPT = """
import keras
import numpy as np
from sklearn.datasets import load_digits

x, y = load_digits(return_X_y=True)
x, y = x[:480].astype("float32"), y[:480]
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(10, activation="softmax")], name="digits")
model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy")
model.fit(x * 16, y, epochs=3, batch_size=32, validation_split=0.2, verbose=0)
print("SCRIPT-SAYS done")
"""


def test_try_fixes_runs_a_trial_per_remedy_and_adds_them_to_the_report(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    logdir, report = tmp_path / "runs", tmp_path / "report.json"
    status = main(["run", "--try-fixes", "--max-trials", "1", "--logdir", str(logdir),
                   "--report", str(report), str(script)])
    captured = capsys.readouterr()
    assert status == 0
    assert captured.out == "SCRIPT-SAYS done\n"  # a trial's output goes to its folder
    assert "remedies tried" in captured.err and "improved" in captured.err
    doc = json.loads(report.read_text())
    [trial] = doc["trials"]
    assert trial["finding"] == "unnormalized_input" and trial["verdict"] == "improved"
    assert trial["fix"] is True and trial["measure"] == "val_loss"
    assert trial["after"] < trial["before"] and len(trial["curves"]["after"]["val_loss"]) == 3
    assert trial["change"].startswith("add keras.layers.Normalization()")
    folder = logdir / "try-1-normalize_input"
    assert "SCRIPT-SAYS done" in (folder / "output.txt").read_text()
    assert json.loads((folder / "report.json").read_text())["exit_code"] == 0
    runs = sorted(str(r) for r in find_runs(logdir))
    assert len(runs) == 2 and any("try-1-normalize_input" in r for r in runs)  # side by side
