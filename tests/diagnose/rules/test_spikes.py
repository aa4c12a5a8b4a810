"""`loss_spike`: from the firewall's records, live and offline, and from stock Keras batch losses."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest

import tfguard
from tfguard.diagnose import LiveDiagnosis, Signals, Thresholds, diagnose_logdir
from tfguard.diagnose._inputs.signals import MissingSignals
from tfguard.diagnose._rules.spikes import (
    infer_epoch_ends,
    is_running_mean,
    loss_spike,
    per_batch,
    spike_points,
)
from tfguard.summary import Logger

BATCH, PER_EPOCH = 16, 80


def _healthy_losses(n, seed=0):
    rng = np.random.default_rng(seed)
    return 1.5 * np.exp(-np.arange(n) / 150.0) + 0.3 + 0.05 * rng.normal(size=n)


def _running_means(losses, per_epoch):
    """What Keras logs as a batch's `loss`: the mean of its epoch so far."""
    out = np.empty_like(losses)
    for start in range(0, len(losses), per_epoch):
        chunk = losses[start:start + per_epoch]
        out[start:start + per_epoch] = np.cumsum(chunk) / np.arange(1, len(chunk) + 1)
    return out


def test_spike_points_is_the_firewall_rule_with_a_clean_window():
    losses = _healthy_losses(300)
    assert spike_points(losses, 128, 6.0, 64) == []
    spoiled = losses.copy()
    spoiled[[100, 101, 200]] = [9.0, 9.0, np.nan]
    assert [i for i, *_ in spike_points(spoiled, 128, 6.0, 64)] == [100, 101]  # the first never widened the window
    assert [i for i, *_ in spike_points(spoiled, 128, 6.0, 120)] == []  # before the warm-up nothing is called


def test_a_running_mean_is_undone_into_batch_losses_and_its_spike_found():
    losses = _healthy_losses(4 * PER_EPOCH)
    losses[170] = 6.0
    steps = np.arange(1, len(losses) + 1)
    ends = np.arange(1, 5) * PER_EPOCH
    signals = Signals.from_arrays({"batch/loss": (steps, _running_means(losses, PER_EPOCH))}, epoch_end_steps=ends)
    assert is_running_mean(steps, _running_means(losses, PER_EPOCH), ends)
    assert not is_running_mean(steps, losses, ends)
    series, how = per_batch(signals)
    np.testing.assert_allclose(series.values, losses, rtol=1e-9, atol=1e-9)
    assert "running mean" in how
    finding, = loss_spike(signals, Thresholds())
    assert finding.id == "loss_spike" and finding.severity == "warning"
    assert finding.onset_step == 171 and finding.onset_epoch == 2
    assert finding.evidence["count"] == 1 and finding.evidence["applied"] == 1
    assert "None was rejected" in finding.message


def test_batches_per_epoch_are_read_off_the_epoch_losses_when_no_validation_gives_them():
    losses = _healthy_losses(3 * PER_EPOCH)
    means = _running_means(losses, PER_EPOCH)
    every = 4
    steps = np.arange(every, len(losses) + 1, every)
    batch = Signals.from_arrays({"batch/loss": (steps, means[steps - 1])}).series("batch/loss")
    epochs = Signals.from_arrays({"train/loss": (None, means[PER_EPOCH - 1::PER_EPOCH])}).series("train/loss")
    assert infer_epoch_ends(batch, epochs).tolist() == [80, 160, 240]


def test_without_batch_losses_or_records_the_rule_says_what_is_missing():
    with pytest.raises(MissingSignals, match="no batch losses were logged"):
        loss_spike(Signals.from_arrays({"train/loss": (None, [1.0, 0.5])}), Thresholds())


def _data(batches, spoil=()):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batches * BATCH, 8)).astype("float32")
    y = np.argmax(x[:, :3] * [3.0, 2.0, 1.0], axis=1).astype("int64")
    for b in spoil:
        for row, hot, label in ((3, 0, 2), (11, 1, 0)):
            x[b * BATCH + row] = 50.0 * np.eye(8)[hot]
            y[b * BATCH + row] = label
    return x, y


def _model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")
    return model


def test_stock_keras_batch_losses_show_an_unguarded_spike(tmp_path):
    """`keras.callbacks.TensorBoard(update_freq=1)` logs each batch's running mean; the spike is found in it."""
    x, y = _data(PER_EPOCH, spoil=[150 - PER_EPOCH])
    model = _model()
    board = keras.callbacks.TensorBoard(str(tmp_path / "keras"), update_freq=1)
    model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0, callbacks=[board])
    diagnosis, = diagnose_logdir(tmp_path / "keras")
    found = [f for f in diagnosis.findings if f.id == "loss_spike"]
    assert len(found) == 1 and found[0].severity == "warning"
    # Keras counts batches from 1: the 71st batch of epoch 0 and of epoch 1 (the records come back)
    assert found[0].evidence["steps"] == "71, 151" and found[0].onset_epoch == 0


def test_the_firewall_records_give_the_finding_live_and_offline(tmp_path):
    x, y = _data(PER_EPOCH, spoil=[70])
    model = tfguard.guard(_model(), policy="skip", spikes=True, quarantine_dir=None)
    live = LiveDiagnosis(scalars_every=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0,
                  callbacks=[Logger(tmp_path / "run", scalars_every=2), live])
    offline, = diagnose_logdir(tmp_path / "run")
    for diagnosis in (live.diagnosis, offline):
        finding, = [f for f in diagnosis.findings if f.id == "loss_spike"]
        assert finding.severity == "info"  # rejected: nothing was applied
        assert finding.evidence["rejected"] == finding.evidence["count"] == 2
        assert finding.evidence["batches"] == f"70, {70 + PER_EPOCH}"
        assert finding.onset_epoch == 0 and "rejected every one" in finding.message
