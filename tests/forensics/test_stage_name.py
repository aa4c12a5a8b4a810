"""Logs and quarantines written before the firewall's check stages were called "stages" still read.

Event records and `meta.json` files written by earlier versions name the
stage `"checkpoint"`; the readers take it as the stage.
"""

from __future__ import annotations

import json

import keras
import numpy as np

import tfguard
from tfguard._findings import event_record
from tfguard._forensics.quarantine import META_FILE, load_quarantine


def test_an_event_record_of_an_earlier_version_names_its_stage():
    old = {"step": 3, "checkpoint": "data", "where": "x", "check": "finite"}
    assert event_record(old)["stage"] == "data"
    assert event_record({**old, "stage": "loss"})["stage"] == "loss"


def test_a_quarantine_of_an_earlier_version_loads_with_its_stage(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    tfguard.guard(model, policy="skip", quarantine_dir=str(tmp_path), localize=False)
    x = np.ones((4, 3), "float32")
    x[2, 1] = np.nan
    model.fit(x, np.ones((4, 1)), batch_size=4, verbose=0)
    folder = tfguard.guard_events(model)[0].quarantine
    meta_path = f"{folder}/{META_FILE}"
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    meta["checkpoint"] = meta.pop("stage")
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(meta, f)
    loaded = load_quarantine(folder)
    assert loaded.meta["stage"] == "data" and "checkpoint" not in loaded.meta
