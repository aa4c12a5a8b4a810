"""Invariant records reach the diagnosis as the other signals do: event files, live history, report order.

The Logger writes one `invariants/records` text per check (several at the
step after the first, all kept when read back); `LiveDiagnosis` keeps the
same records; with both on one model the checks run once. The report lists
a violated invariant before the symptoms it produces.
"""

from __future__ import annotations

import json

import keras
import numpy as np

from tests.invariants import programs
from tfguard import _tags
from tfguard._findings import Finding
from tfguard.diagnose import LiveDiagnosis, diagnose_logdir
from tfguard.diagnose._causes import by_cause
from tfguard.summary import Logger


def test_logger_and_live_share_one_run_of_the_checks_and_the_files_read_back(tmp_path):
    model, x, y = programs.recommender(rowwise=False)
    live = LiveDiagnosis()
    model.fit(x, y, epochs=2, batch_size=32, verbose=0,
              callbacks=[Logger(tmp_path, scalars_every=4, histograms=False), live])
    watched = live._watch.records
    assert len(watched) == len({r["check"] for r in watched})  # each check once
    (offline,) = diagnose_logdir(tmp_path)
    written = [json.loads(text) for _, text in offline.signals.texts[_tags.INVARIANT_RECORDS]]
    assert [r["check"] for r in written] == [r["check"] for r in watched]
    assert [(r["check"], r["step"]) for r in written] == [
        (r["check"], r["step"]) for r in json.loads(json.dumps(watched))]
    offline_ids = {(f.id, f.where, f.onset_step) for f in offline.findings}
    live_ids = {(f.id, f.where, f.onset_step) for f in live.findings}
    assert ("batch_dependence", "recommender_net", 1) in offline_ids & live_ids


def test_invariants_off_writes_and_keeps_nothing(tmp_path):
    model, x, y = programs.recommender(rowwise=False)
    live = LiveDiagnosis(invariants=False)
    model.fit(x, y, epochs=1, batch_size=32, verbose=0,
              callbacks=[Logger(tmp_path, scalars_every=4, histograms=False, invariants=False), live])
    (offline,) = diagnose_logdir(tmp_path)
    assert _tags.INVARIANT_RECORDS not in offline.signals.texts
    assert "batch_dependence" in offline.skipped_ids and "batch_dependence" in live.diagnosis.skipped_ids


def test_the_violated_invariant_is_listed_before_what_it_produces():
    stuck = Finding("no_learning", "error", "the training loss did not decrease.", onset_step=40)
    ignored = Finding("labels_ignored", "error", "the loss ignores the labels.", where="model",
                      onset_step=1)
    dead = Finding("dead_relu", "warning", "dead units.", where="dense", onset_step=2)
    ordered = by_cause([stuck, dead, ignored])
    # the cause first; the symptoms by onset, one another can produce after it (dead ReLUs can stall a run)
    assert [f.id for f in ordered] == ["labels_ignored", "dead_relu", "no_learning"]
    stalled = ordered[2]
    assert stalled.cause == ("labels_ignored", "model")  # linked to the invariant, not to the earlier symptom
    assert stalled.message.endswith("most likely because the loss ignores the labels ('model').")
    assert ordered[1].cause is None  # labels ignored do not kill ReLUs


def test_weight_decay_alone_does_not_count_as_training():
    """Exactly-zero gradients (not missing ones) under AdamW: the decay moves the gate, no update does."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 6)).astype("float32")
    y = rng.integers(0, 2, size=(64, 1)).astype("float32")
    inputs = keras.Input((6,))
    wide = keras.layers.Dense(4, name="wide")(inputs)
    gate = keras.layers.Dense(4, activation="sigmoid", name="gate")(inputs)
    hard = keras.layers.Lambda(lambda g: keras.ops.round(g) + 0.0 * g, name="hard_gate")(gate)
    outputs = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Multiply()([wide, hard]))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.AdamW(1e-2, weight_decay=0.1), loss="binary_crossentropy")
    before = model.get_layer("gate").kernel.numpy().copy()
    live = LiveDiagnosis()
    model.fit(x, y, epochs=1, batch_size=16, verbose=0, callbacks=[live])
    after = model.get_layer("gate").kernel.numpy()
    assert not np.array_equal(before, after)  # the decay moved it
    np.testing.assert_allclose(after / before, (after / before).flat[0], rtol=1e-5)
    (finding,) = [f for f in live.findings if f.id == "untrained_variable"]
    assert finding.evidence["variables"] == "gate/kernel, gate/bias"  # a zero bias stays zero


def test_a_collapse_a_learning_rate_produced_comes_after_it_and_names_it():
    """Dead ReLUs from a rate far too high collapse the output: the rate is the root cause."""
    rate = Finding("learning_rate", "error", "the loss jumped.", onset_step=3,
                   evidence={"learning_rate": 1.0, "direction": "high", "optimizer": "Adam"})
    collapsed = Finding("collapsed_output", "warning", "the same output for all inputs.",
                        where="sequential", onset_step=10)
    stuck = Finding("no_learning", "error", "the training loss did not decrease.", onset_step=40)
    teacher = Finding("trained_unused", "warning", "teacher trained.", where="teacher", onset_step=1)
    ordered = by_cause([stuck, collapsed, rate, teacher])
    assert [f.id for f in ordered] == ["trained_unused", "learning_rate", "collapsed_output",
                                       "no_learning"]
    assert ordered[2].cause == ("learning_rate", None)
    assert ordered[2].message.endswith("most likely because Adam's learning rate is 1.")
    assert ordered[3].cause == ("learning_rate", None)
    assert ordered[0].cause is None  # a program bug is nobody's consequence
