"""A data violation names the examples at fault, and says when the same example comes back (issue 41, item 2).

A new user's program: 2,000 rows, one of them all NaN, shuffled every
epoch, `guard(policy="skip")`. Each epoch the firewall rejects the batch
that holds the row; the violation, the quarantine's meta and the record
the diagnosis reads name the row inside the batch, and from the second
epoch on say that the same values were at fault before: the fault is in
the data.
"""

import json
import warnings
from pathlib import Path

import keras
import numpy as np

import tfguard
from tfguard._forensics.examples import fingerprint, rows_at_fault
from tfguard.summary._runinfo import guard_event_json

BAD_ROW = 1234


def test_the_nan_row_is_named_in_every_epoch_and_its_return_is_said(tmp_path):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2000, 10)).astype("float32")
    x[BAD_ROW] = np.nan
    y = (x[:, 0] > 0).astype("float32")
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="adam", loss="binary_crossentropy")
    tfguard.guard(model, policy="skip", quarantine_dir=str(tmp_path / "q"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        history = model.fit(x, y, epochs=3, batch_size=64, shuffle=True, verbose=0)
    assert history.history["guard_skipped"] == [1.0, 1.0, 1.0]
    events = tfguard.guard_events(model)
    assert [e.stage for e in events] == ["data"] * 3 and all(e.where == "x" for e in events)
    prints = set()
    for number, event in enumerate(events):
        (row,) = event.examples
        assert (row["bad"], row["values"]) == (10, 10)
        assert f"in example {row['row']} of the 64 of the batch (10 of its 10 values)" in event.message
        assert [e["epoch"] for e in row["earlier"]] == list(range(number))
        prints.add(row["fingerprint"])
        assert ("was at fault before with the same values" in event.message) == (number > 0)
        meta = json.loads((Path(event.quarantine) / "meta.json").read_text())
        assert meta["examples"][0]["row"] == row["row"]
        assert json.loads(guard_event_json(event))["examples"][0]["fingerprint"] == row["fingerprint"]
    assert len(prints) == 1  # one example, three batches
    assert "it is in the data, not a transient fault" in events[-1].message


def test_rows_and_fingerprints_follow_the_values_not_the_batch():
    x = np.zeros((5, 2, 2), "float32")
    x[1, 0, 1] = np.inf
    x[4] = np.nan
    assert rows_at_fault(tfguard.checks.finite(), x) == [{"row": 1, "bad": 1, "values": 4},
                                                         {"row": 4, "bad": 4, "values": 4}]
    labels = np.array([0, 1, 7, 2])
    assert [r["row"] for r in rows_at_fault(tfguard.checks.labels(3), labels)] == [2]
    assert rows_at_fault(tfguard.checks.in_range(0, 1), np.array([[0.5, 2.0], [0.1, 0.2]]))[0]["row"] == 0
    y = np.arange(5.0)
    moved = fingerprint((x[[4, 0]], y[[4, 0]], None), 0)
    assert moved == fingerprint((x, y, None), 4) != fingerprint((x, y, None), 0)


def test_the_replay_names_the_rows_at_fault(tmp_path):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 4)).astype("float32")
    x[6, 2] = 1e30  # finite: the data check passes, the square overflows in the forward pass
    model = keras.Sequential([keras.Input((4,)), keras.layers.Lambda(lambda t: t * t * t, name="cube"),
                              keras.layers.Dense(1, name="out")])
    model.compile(optimizer="sgd", loss="mse")
    tfguard.guard(model, policy="skip", quarantine_dir=str(tmp_path / "q"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        model.fit(x, np.zeros((32, 1), "float32"), batch_size=32, shuffle=False, verbose=0)
    (event,) = tfguard.guard_events(model)
    assert event.stage == "forward" and not event.examples
    report = tfguard.replay(event.quarantine, model=model)
    assert report.first_layer == "cube" and report.examples == [{"row": 6, "bad": 1, "values": 4}]
    assert "Examples at fault: example 6 of the batch (1 of its 4 values)." in report.summary()
