"""A large update is checked before it is written: rejected steps stay bitwise, nothing is held for it."""

import warnings

import keras
import numpy as np
import pytest

import tfguard
from tests.conftest import traced_step
from tests.firewall import foreign
from tests.summary.readback import read_run
from tfguard._hooks.transaction import Transaction, tf_variable


def _classifier():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(16, activation="relu")(inputs)
    h = keras.layers.BatchNormalization()(h)
    outputs = keras.layers.Dense(4, activation="softmax")(h)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


@pytest.fixture
def skips(monkeypatch):
    """The ids every restore of the test left out."""
    seen = []
    original = Transaction.restore_if

    def spy(self, reject, skip=frozenset()):
        seen.append(frozenset(skip))
        return original(self, reject, skip)

    monkeypatch.setattr(Transaction, "restore_if", spy)
    return seen


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_gated_update_is_left_out_of_the_restore_and_a_nan_batch_still_changes_nothing(skips, jit_compile):
    model = _classifier()
    model.jit_compile = jit_compile
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 8), dtype=np.float32), rng.integers(0, 4, 32)
    tfguard.guard(model, policy="skip", quarantine_dir=None, hold_bytes=0)
    model.fit(x[:16], y[:16], batch_size=16, verbose=0)
    gated = {id(tf_variable(v)) for v in [*model.trainable_variables, *model.optimizer.variables[2:]]}
    assert skips and gated <= skips[-1]  # weights and slots are not held for a restore
    assert not any(id(tf_variable(v)) in skips[-1] for v in model.non_trainable_variables)  # BN stats are
    before = foreign.state_of(model, model.optimizer, metrics=False)
    bad = x[16:].copy()
    bad[3, 2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        model.fit(bad, y[16:], batch_size=16, verbose=0)
    assert foreign.bitwise_equal(before, foreign.state_of(model, model.optimizer, metrics=False))
    assert tfguard.guard_events(model)[0].stage == "data"
    model.fit(x[16:], y[16:], batch_size=16, verbose=0)
    assert not foreign.bitwise_equal(before, foreign.state_of(model, model.optimizer, metrics=False))


def test_an_overflowing_gated_update_is_never_written_and_named(skips):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="d")])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=1e38), loss="mse")
    x = np.random.default_rng(0).random((16, 4), dtype=np.float32)
    tfguard.guard(model, policy="raise", quarantine_dir=None, hold_bytes=0)
    before = foreign.state_of(model, model.optimizer, metrics=False)
    with pytest.raises(tfguard.GuardViolation) as info:
        model.fit(x, np.full((16, 3), 10.0, np.float32), batch_size=16, verbose=0)
    assert info.value.stage == "update" and "d/kernel" in info.value.where
    assert "would have" in str(info.value)
    assert foreign.bitwise_equal(before, foreign.state_of(model, model.optimizer, metrics=False))
    assert skips[-1]  # the update was gated, not held


def test_a_step_whose_loss_comes_after_the_update_holds_it_again(skips):
    """A VAE-style step returns its losses itself: a flag after the gate means the update is restored."""

    class OwnLoss(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

        def train_step(self, data):
            import tensorflow as tf
            x, y = data
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((self(x) - y) ** 2)
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply(grads, self.trainable_variables)
            return {"loss": loss}

    keras.utils.set_random_seed(0)
    model = OwnLoss()
    model.compile(optimizer="adam")
    x = np.random.default_rng(0).random((16, 3), dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        tfguard.guard(model, policy="skip", quarantine_dir=None, hold_bytes=0)
        model.fit(x, np.ones((16, 2), np.float32), batch_size=16, verbose=0)
    assert skips and skips[-1] == frozenset()


def test_a_subclassed_model_built_lazily_in_its_first_step_is_guarded_and_logged(tmp_path):
    """Embedding lookups in `call`, nothing built before `fit`: Keras builds the layers inside the
    first traced step (in a scratch graph); their outputs there must not reach the guarded step."""

    class Recommender(keras.Model):
        def __init__(self):
            super().__init__()
            self.users = keras.layers.Embedding(20, 4)
            self.items = keras.layers.Embedding(30, 4)
            self.out = keras.layers.Dense(1, activation="relu")

        def call(self, ids):
            return self.out(self.users(ids[:, 0]) * self.items(ids[:, 1]))

    keras.utils.set_random_seed(0)
    model = Recommender()
    model.compile(optimizer="adam", loss="mse")
    rng = np.random.default_rng(0)
    ids = np.stack([rng.integers(0, 20, 64), rng.integers(0, 30, 64)], axis=1)
    tfguard.guard(model, policy="skip", quarantine_dir=None)
    logger = tfguard.Logger(str(tmp_path), scalars_every=1, histograms_every=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        history = model.fit(ids, rng.random((64, 1)), batch_size=16, epochs=2, verbose=0, callbacks=[logger])
    assert np.isfinite(history.history["loss"]).all() and history.history["guard_skipped"] == [0, 0]
    run = read_run(logger.run_path)
    assert any(tag.startswith("grad_norm/") for tag in run)
    assert any(tag.startswith("hist/gradients/") for tag in run)


def test_a_non_finite_gradient_of_a_gated_update_is_named_without_being_kept_to_count():
    """The gate judges a gradient by its sum and lets it die with the update: the violation names it."""
    import tensorflow as tf
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    h = keras.layers.Dense(3, name="d")(inputs)
    # sqrt at 0: a finite forward pass whose gradient is infinite
    outputs = keras.layers.Lambda(lambda t: t + tf.sqrt(tf.nn.relu(t) - tf.nn.relu(t)), name="root")(h)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="mse")
    x = np.random.default_rng(0).random((16, 4), dtype=np.float32)
    model.optimizer.build(model.trainable_variables)
    tfguard.guard(model, policy="raise", quarantine_dir=None, hold_bytes=0)
    before = foreign.state_of(model, model.optimizer, metrics=False)
    with pytest.raises(tfguard.GuardViolation) as info:
        model.fit(x, np.ones((16, 3), np.float32), batch_size=16, verbose=0)
    assert info.value.stage == "gradients" and "d/kernel" in info.value.where
    assert "has a NaN or Inf among its 12 values" in str(info.value)
    assert foreign.bitwise_equal(before, foreign.state_of(model, model.optimizer, metrics=False))


def test_every_layer_checked_in_a_gated_step_is_judged_at_its_apply_not_held_to_the_end():
    """`forward="layers"`: a layer output kept for its NaN count lived through the backward pass (ResNet50: ~100 MB)."""
    import tensorflow as tf
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    h = keras.layers.Dense(3, name="d")(inputs)
    h = keras.layers.Lambda(lambda t: tf.math.log(t), name="log")(h)  # NaN where the Dense output is negative
    outputs = keras.layers.Dense(2, name="out")(h)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    tfguard.guard(model, policy="raise", forward="layers", quarantine_dir=None, hold_bytes=0)
    graph = traced_step(model).get_concrete_function(
        (tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None, 2), tf.float32))).graph
    layer_outputs = {op.name for op in graph.get_operations()
                     if ("/log" in op.name or "/out" in op.name) and not op.name.startswith("gradient_tape")}
    branches = [op for op in graph.get_operations() if op.type in ("If", "StatelessIf")]
    assert branches and not any(t.op.name in layer_outputs for op in branches for t in op.inputs)
    before = foreign.state_of(model, model.optimizer, metrics=False)
    x = -np.random.default_rng(0).random((16, 4), dtype=np.float32)
    with pytest.raises(tfguard.GuardViolation) as info:
        model.fit(x, np.ones((16, 2), np.float32), batch_size=16, verbose=0)
    assert info.value.stage == "forward" and "log" in info.value.where
    assert "has a NaN or Inf among its 48 values" in str(info.value)
    assert foreign.bitwise_equal(before, foreign.state_of(model, model.optimizer, metrics=False))


_OPTIMIZERS = {
    "sgd_nesterov": lambda: keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
    "adamw": lambda: keras.optimizers.AdamW(1e-2, weight_decay=0.01),
    "nadam": lambda: keras.optimizers.Nadam(1e-2),
    "rmsprop": lambda: keras.optimizers.RMSprop(1e-2, momentum=0.5),
    "adam_clipped_scheduled": lambda: keras.optimizers.Adam(
        keras.optimizers.schedules.ExponentialDecay(1e-2, 3, 0.9), global_clipnorm=0.1),
    "adam_ema": lambda: keras.optimizers.Adam(1e-2, use_ema=True),
    "lion": lambda: keras.optimizers.Lion(1e-3),
}


@pytest.mark.parametrize("name", sorted(_OPTIMIZERS))
def test_a_small_update_writes_its_checked_dry_run_bitwise_what_its_own_apply_writes(name, skips):
    # A model small enough to hold is gated too: the values its dry run checked are what is written, so
    # nothing is copied to roll it back and the optimizer's math runs once. Training must not move by one
    # bit: weights, slots, iterations and the EMA equal an unguarded model's after two epochs (a max-norm
    # constraint included), and the written state is left out of the restore.
    def model():
        keras.utils.set_random_seed(0)
        m = keras.Sequential([keras.Input((8,)),
                              keras.layers.Dense(32, activation="relu", kernel_constraint=keras.constraints.MaxNorm(1.0)),
                              keras.layers.Dense(3, activation="softmax")])
        m.compile(optimizer=_OPTIMIZERS[name](), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        return m

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(96, 8)).astype(np.float32), rng.integers(0, 3, 96)
    plain, guarded = model(), model()
    tfguard.guard(guarded, policy="skip", quarantine_dir=None)
    for m in (plain, guarded):
        m.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    assert foreign.bitwise_equal(foreign.state_of(plain, plain.optimizer, metrics=False),
                                 foreign.state_of(guarded, guarded.optimizer, metrics=False))
    written = {id(tf_variable(v)) for v in [*guarded.trainable_variables, guarded.optimizer.iterations]}
    assert skips and written <= skips[-1]
