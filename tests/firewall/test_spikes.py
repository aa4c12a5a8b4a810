"""The spike stage: a step whose loss or gradient norm is an outlier is a violation like a NaN.

A small classifier learns a separable task over a few hundred batches of
16; bad batches are injected at known positions: two rows scaled by 100
(corrupted records), six rows with the wrong label (mislabelled), a NaN.
"""

import dataclasses
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfguard
from tests.firewall import foreign
from tfguard._errors import ContractError
from tfguard._firewall import instrumentation_of
from tfguard._firewall.spikes import SpikeConfig, spike_config, window_statistics
from tfguard._hooks.transaction import Transaction, tf_variable

BATCH = 16
BATCHES = 260
CORRUPTED, MISLABELLED, NAN = 120, 200, 160


def _data(batches=BATCHES, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batches * BATCH, 8)).astype("float32")
    y = np.argmax(x[:, :3] * [3.0, 2.0, 1.0], axis=1).astype("int64")
    return x, y


def _spoiled(x, y):
    """The data with a corrupted, a mislabelled and a NaN batch."""
    x, y = x.copy(), y.copy()
    x[CORRUPTED * BATCH: CORRUPTED * BATCH + 2] *= 100.0
    rows = slice(MISLABELLED * BATCH, MISLABELLED * BATCH + 6)
    y[rows] = (y[rows] + 1) % 3
    x[NAN * BATCH + 5, 2] = np.nan
    return x, y


def _without(x, y, batches):
    keep = np.ones(len(x), bool)
    for b in batches:
        keep[b * BATCH:(b + 1) * BATCH] = False
    return x[keep], y[keep]


def _model(jit_compile=False, model_class=keras.Model):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(16, activation="relu")(inputs)
    outputs = keras.layers.Dense(3, activation="softmax")(h)
    model = model_class(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], jit_compile=jit_compile)
    return model


def _fit(model, x, y, **guard):
    guard = {"policy": "skip", "spikes": True, "quarantine_dir": None, **guard}
    tfguard.guard(model, **guard)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        history = model.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0)
    return history, tfguard.guard_events(model)


def test_a_healthy_run_of_hundreds_of_steps_rejects_nothing():
    x, y = _data()
    model = _model()
    history, events = _fit(model, x, y)
    assert events == [] and history.history["guard_skipped"] == [0.0]
    window = instrumentation_of(model).spike_window
    assert len(window.values("loss")) == len(window.values("gradient_norm")) == 128


def test_bad_batches_are_rejected_where_they_sit_and_the_weights_equal_a_run_without_them():
    x, y = _data()
    spoiled = _model()
    history, events = _fit(spoiled, *_spoiled(x, y))
    assert [(e.batch, e.stage) for e in events] == [(CORRUPTED, "spike"), (NAN, "data"), (MISLABELLED, "spike")]
    assert history.history["guard_skipped"] == [3.0]  # counted in `history` as any rejected step
    assert {e.where for e in events if e.stage == "spike"} <= {"loss", "gradient_norm"}
    clean = _model()
    _, none = _fit(clean, *_without(x, y, [CORRUPTED, NAN, MISLABELLED]))
    assert none == []
    assert foreign.bitwise_equal(foreign.state_of(spoiled, spoiled.optimizer),  # metrics too: one fit each
                                 foreign.state_of(clean, clean.optimizer))
    loss = instrumentation_of(spoiled).spike_window.values("loss")
    assert len(loss) == 128 and np.isfinite(loss).all()  # the NaN batch never entered the window


def test_the_window_lives_across_fits_and_guarding_again_starts_it_over():
    x, y = _data(40)
    model = _model()
    _fit(model, x[:20 * BATCH], y[:20 * BATCH])
    model.fit(x[20 * BATCH:], y[20 * BATCH:], batch_size=BATCH, shuffle=False, verbose=0)
    assert len(instrumentation_of(model).spike_window.values("loss")) == 40  # a fit in a loop keeps it
    tfguard.guard(model, policy="skip", spikes=True, quarantine_dir=None)
    assert len(instrumentation_of(model).spike_window.values("loss")) == 0
    model.fit(x[:5 * BATCH], y[:5 * BATCH], batch_size=BATCH, shuffle=False, verbose=0)
    assert len(instrumentation_of(model).spike_window.values("loss")) == 5


def test_a_nan_batch_does_not_poison_the_window():
    """OLMo-core once let a NaN into its window and skipped the next 129 steps."""
    x, y = _data()
    x = x.copy()
    x[NAN * BATCH + 5, 2] = np.nan
    model = _model()
    _, events = _fit(model, x, y, data=None)  # no data check: the NaN reaches the model
    # Caught once, at the outputs where the CPU's ReLU kernel passes a NaN on (AMD EPYC, TF 2.21), at the
    # gradients where it drops it to 0 (the machines this test was written on): either way not a spike.
    assert [e.batch for e in events] == [NAN]
    assert events[0].stage in ("forward", "gradients")
    window = instrumentation_of(model).spike_window
    assert np.isfinite(window.values("loss")).all() and np.isfinite(window.values("gradient_norm")).all()


def test_raise_names_the_signal_its_value_the_window_and_the_threshold():
    x, y = _spoiled(*_data())
    model = _model()
    with pytest.raises(tfguard.GuardViolation) as info:
        _fit(model, x, y, policy="raise")
    error = info.value
    assert error.stage == "spike" and error.batch == CORRUPTED and error.where in ("loss", "gradient_norm")
    counts = error.counts
    assert counts["value"] > counts["threshold"] == pytest.approx(counts["mean"] + 6 * counts["std"], rel=1e-5)
    assert counts["window"] == 120 and counts["sigmas"] == 6.0
    text = str(error)
    assert f"is a spike: {counts['value']:.6g} > {counts['threshold']:.6g}" in text
    assert f"the mean {counts['mean']:.6g} + 6 x the std {counts['std']:.6g} of the last 120" in text
    assert "tfguard replay" in text  # the hint


def test_warn_applies_the_spike_reports_it_and_keeps_it_out_of_the_window():
    x, y = _spoiled(*_data())
    model = _model()
    with pytest.warns(tfguard.GuardWarning, match="is a spike"):
        tfguard.guard(model, policy="warn", spikes=True, quarantine_dir=None)
        model.fit(x[:(CORRUPTED + 1) * BATCH], y[:(CORRUPTED + 1) * BATCH], batch_size=BATCH, shuffle=False,
                  verbose=0)
    event, = tfguard.guard_events(model)
    assert event.stage == "spike" and event.applied and event.action == "warned"
    assert int(model.optimizer.iterations) == CORRUPTED + 1  # applied
    window = instrumentation_of(model).spike_window.values("loss")
    assert len(window) == CORRUPTED and window.max() < event.counts["threshold"]


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_gated_update_is_decided_on_the_spike_before_it_is_written(jit_compile, monkeypatch):
    """`hold_bytes=0`: every update is checked before it is written; the spike flag is among its flags."""
    skips = []
    original = Transaction.restore_if
    monkeypatch.setattr(Transaction, "restore_if",
                        lambda self, reject, skip=frozenset(): (skips.append(skip), original(self, reject, skip))[1])
    x, y = _data(BATCHES)
    spoiled = _model(jit_compile)
    xs, ys = _spoiled(x, y)
    _, events = _fit(spoiled, xs[:(MISLABELLED + 1) * BATCH], ys[:(MISLABELLED + 1) * BATCH], hold_bytes=0, data=None)
    assert [(e.batch, e.stage) for e in events][0] == (CORRUPTED, "spike")
    gated = {id(tf_variable(v)) for v in spoiled.trainable_variables}
    assert skips and gated <= skips[-1]  # the gate's decision covered the step's: nothing held to restore
    clean = _model(jit_compile)
    bad = [e.batch for e in events]
    _fit(clean, *_without(x[:(MISLABELLED + 1) * BATCH], y[:(MISLABELLED + 1) * BATCH], bad), hold_bytes=0,
         data=None)
    assert foreign.bitwise_equal(foreign.state_of(spoiled, spoiled.optimizer, metrics=False),
                                 foreign.state_of(clean, clean.optimizer, metrics=False))


class BurstAt(keras.callbacks.Callback):
    """A learning-rate burst: the rate is multiplied for one batch, and the weights after it kept."""

    def __init__(self, batch, factor):
        super().__init__()
        self.batch, self.factor, self.after = batch, factor, None

    def on_train_batch_begin(self, batch, logs=None):
        if batch == self.batch:
            self.rate = float(self.model.optimizer.learning_rate)
            self.model.optimizer.learning_rate = self.rate * self.factor

    def on_train_batch_end(self, batch, logs=None):
        if batch == self.batch:
            self.model.optimizer.learning_rate = self.rate
            self.after = foreign.state_of(self.model, self.model.optimizer, metrics=False)


def test_the_first_step_after_a_learning_rate_burst_is_rejected_and_spikes_in_a_row_stop_the_run():
    """The burst's own step looks healthy (its loss and gradients come before its update); the next is a spike.

    The weights it damaged stay damaged: every later batch spikes on them, and the run stops after
    `max_consecutive_skips`, with the weights of the burst's step, bitwise.
    """
    x, y = _data()
    model = _model()
    burst = BurstAt(100, 3000.0)
    tfguard.guard(model, policy="skip", spikes=True, quarantine_dir=None, max_consecutive_skips=3)
    with warnings.catch_warnings(), pytest.raises(tfguard.GuardViolation) as info:
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        model.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0, callbacks=[burst])
    assert [e.batch for e in tfguard.guard_events(model)] == [101, 102, 103, 104]
    assert "Spikes in a row are a new level" in str(info.value)
    assert foreign.bitwise_equal(burst.after, foreign.state_of(model, model.optimizer, metrics=False))


def test_a_custom_train_step_is_watched_through_its_compute_loss():
    x, y = _data()
    spoiled = _model(model_class=foreign.CustomStep)
    _, events = _fit(spoiled, *_spoiled(x, y), data=None)
    assert [e.batch for e in events if e.stage == "spike"] == [CORRUPTED, MISLABELLED]


def test_a_gan_is_watched_through_its_gradient_norm_and_both_optimizers_stay_untouched():
    model, images = foreign.gan(images=16 * 120)
    images = images.copy()
    images[100 * 16: 101 * 16] *= 1e3
    states = []

    class Before(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 100:
                states.append(foreign.state_of(model, model.d_optimizer, model.g_optimizer))

        def on_train_batch_end(self, batch, logs=None):
            if batch == 100:
                states.append(foreign.state_of(model, model.d_optimizer, model.g_optimizer))

    tfguard.guard(model, policy="skip", spikes=True, quarantine_dir=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        model.fit(images, batch_size=16, shuffle=False, verbose=0, callbacks=[Before()])
    events = tfguard.guard_events(model)
    assert [(e.batch, e.stage, e.where) for e in events] == [(100, "spike", "gradient_norm")]
    assert foreign.bitwise_equal(*states)


def test_a_hand_written_loop_is_watched_through_its_returned_loss(tmp_path):
    x, y = _spoiled(*_data())
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(3)])
    optimizer = keras.optimizers.Adam(3e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    step = tfguard.guard_step(foreign.loop_step(model, optimizer, loss_fn), model, policy="skip",
                              quarantine_dir=str(tmp_path), spikes={"window": 64, "warmup": 32})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        for b in range(MISLABELLED + 1):
            if b != NAN:
                step(tf.constant(x[b * BATCH:(b + 1) * BATCH]), tf.constant(y[b * BATCH:(b + 1) * BATCH]))
    assert [(e.batch, e.stage) for e in step.events] == [(CORRUPTED, "spike"), (MISLABELLED - 1, "spike")]
    assert len(step.spike_window.values("loss")) == 64


def test_the_replay_says_the_batch_causes_it_names_the_rows_and_knows_them_when_they_come_back(tmp_path):
    x, y = _data()
    x, y = x.copy(), y.copy()
    for row, hot, label in ((3, 0, 2), (11, 1, 0)):  # corrupted values that say one class, and another label
        x[CORRUPTED * BATCH + row] = 50.0 * np.eye(8)[hot]
        y[CORRUPTED * BATCH + row] = label
    model = _model()
    tfguard.guard(model, policy="skip", spikes=True, quarantine_dir=str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        model.fit(x[:(CORRUPTED + 1) * BATCH], y[:(CORRUPTED + 1) * BATCH], batch_size=BATCH, epochs=2,
                  shuffle=False, verbose=0)
    first, again = tfguard.guard_events(model)
    report = first.replay
    assert report.verdict == "reproduces"
    assert report.spike_replayed > report.spike_threshold
    assert sorted(report.driving_rows) == [3, 11]
    assert sorted(row for row, _ in report.example_losses[:2]) == [3, 11]
    assert report.example_losses[0][1] >= report.example_losses[1][1] >= report.example_losses[2][1]
    assert report.replayed_without < report.spike_threshold
    assert "it reproduces, the batch causes it" in first.message and "row(s) 3, 11" in first.message
    assert again.batch == 2 * CORRUPTED + 1  # the same records, the next epoch: recognized
    assert "Example 3 was at fault before with the same values (epoch 0: batch 120, row 3)" in again.message


FAULT = tf.Variable(1.0, trainable=False)


def test_a_spike_that_does_not_reproduce_is_called_transient(tmp_path):
    """A fault outside the model (hardware, nondeterminism) blows one step up; the batch is innocent."""
    x, y = _data()
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(16, activation="relu")(inputs)
    h = keras.layers.Lambda(lambda t: t * FAULT, name="fault")(h)
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(h))
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")

    class Fault(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            FAULT.assign(40.0 if batch == 100 else 1.0)

    tfguard.guard(model, policy="skip", spikes=True, quarantine_dir=str(tmp_path), localize=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        model.fit(x[:101 * BATCH], y[:101 * BATCH], batch_size=BATCH, shuffle=False, verbose=0,
                  callbacks=[Fault()])
    event, = tfguard.guard_events(model)
    FAULT.assign(1.0)
    report = tfguard.replay(event.quarantine, model=model)
    assert report.verdict == "transient" and report.spike_replayed < report.spike_threshold
    assert "it does not reproduce, a transient" in report.summary()
    assert report.driving_rows == []


def test_the_window_statistics_are_the_sample_mean_and_std_of_the_values_held():
    values = np.array([1.0, 4.0, 2.0, 8.0, 5.0])
    ring = tf.constant([np.r_[values, 0.0, 0.0], np.r_[2 * values, 9.0, 9.0]], tf.float32)
    stats = window_statistics(ring, tf.constant(5, tf.int64), 6.0).numpy()
    assert stats[0] == pytest.approx([values.mean(), values.std(ddof=1), values.mean() + 6 * values.std(ddof=1), 5])
    assert stats[1] == pytest.approx([2 * values.mean(), 2 * values.std(ddof=1),
                                      2 * values.mean() + 12 * values.std(ddof=1), 5])  # the 9s are not held yet
    full = window_statistics(tf.constant([[3.0, 1.0]]), tf.constant(7, tf.int64), 1.0).numpy()
    assert full[0] == pytest.approx([2.0, np.sqrt(2.0), 2.0 + np.sqrt(2.0), 2])  # a wrapped ring holds `window`


def test_the_configuration_is_a_frozen_dataclass_or_a_mapping_and_says_what_is_wrong():
    assert spike_config(True) == SpikeConfig(window=128, sigmas=6.0, warmup=64, signals=("loss", "gradient_norm"))
    assert spike_config({"signals": ["loss"], "sigmas": 4}) == SpikeConfig(signals=("loss",), sigmas=4.0)
    with pytest.raises(ContractError, match="warmup <= window"):
        SpikeConfig(window=32)
    with pytest.raises(ContractError, match="expected one or more of"):
        spike_config({"signals": ("accuracy",)})
    with pytest.raises(ContractError, match="invalid key for `spikes`: windows"):
        spike_config({"windows": 3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        SpikeConfig().window = 3


REPLICAS_PROGRAM = """
from tests.firewall.test_spikes import BATCH, _data
from tfguard._firewall import instrumentation_of
x, y = _data(80)
x[30 * 2 * BATCH + 20] = 50.0 * np.eye(8)[0]  # in the second replica's half of global batch 30
y[30 * 2 * BATCH + 20] = 2
with strategy.scope():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(16, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(h))
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy")
tfguard.guard(model, policy="skip", spikes={"window": 16, "warmup": 8}, quarantine_dir=None)
import warnings
warnings.simplefilter("ignore")
model.fit(x, y, batch_size=2 * BATCH, shuffle=False, verbose=0)
print("EVENTS", [(e.batch, e.stage) for e in tfguard.guard_events(model)])
window = instrumentation_of(model).spike_window
ring, count = window.ring(("loss", "gradient_norm"))
copies = [np.array(t) for t in strategy.experimental_local_results(ring)]
assert len(copies) == 2 and np.array_equal(copies[0], copies[1])
print("WINDOW", [int(t) for t in strategy.experimental_local_results(count)])
for v in model.trainable_variables:
    values = [t.numpy() for t in strategy.experimental_local_results(v.value)]
    assert np.array_equal(values[0], values[1]), v.path
print("IDENTICAL")
"""


def test_every_replica_decides_alike_and_keeps_the_same_window():
    from tests.firewall import replicas

    result = replicas.run(REPLICAS_PROGRAM)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "EVENTS [(30, 'spike')]" in result.stdout
    assert "WINDOW [39, 39]" in result.stdout
    assert "IDENTICAL" in result.stdout
