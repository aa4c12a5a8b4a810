"""Every optimizer Keras ships, through the guard: a clean step is plain Keras's, a rejected one changes nothing.

The model has an `Embedding` (a sparse gradient) and a `Dense` (dense
gradients). Each optimizer runs held (`hold_bytes` at its default: the
update is written, then rolled back when the step is rejected) and gated
(`hold_bytes=0`: the update is computed without being written first,
`tfguard._hooks.dry_run`). Plain Keras's sparse updates of Adagrad,
Adadelta, Adafactor and centered RMSprop raise on a NaN gradient after
writing part of it; under the guard a rejected step never reaches them.
"""

import warnings

import keras
import numpy as np
import pytest

import tfguard
from tests.firewall import foreign

OPTIMIZERS = {
    "adadelta": lambda: keras.optimizers.Adadelta(1.0),
    "adafactor": lambda: keras.optimizers.Adafactor(),
    "adagrad": lambda: keras.optimizers.Adagrad(0.1),
    "adam": lambda: keras.optimizers.Adam(1e-2),
    "adamw": lambda: keras.optimizers.AdamW(1e-2, weight_decay=0.1),
    "adamax": lambda: keras.optimizers.Adamax(1e-2),
    "ftrl": lambda: keras.optimizers.Ftrl(0.1),
    "lamb": lambda: keras.optimizers.Lamb(1e-2),
    "lion": lambda: keras.optimizers.Lion(1e-3),
    "loss_scale_adam": lambda: keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-2)),
    "muon": lambda: keras.optimizers.Muon(1e-2),
    "multi_adagrad_embedding_adam": lambda: keras.optimizers.MultiOptimizer(keras.optimizers.OptimizerMap(
        keras.optimizers.Adam(1e-2), {"embed/.*": keras.optimizers.Adagrad(0.1)})),
    "nadam": lambda: keras.optimizers.Nadam(1e-2),
    "rmsprop_centered": lambda: keras.optimizers.RMSprop(1e-2, centered=True),
    "schedule_free_adamw": lambda: keras.optimizers.ScheduleFreeAdamW(1e-2),
    "sgd_momentum": lambda: keras.optimizers.SGD(0.1, momentum=0.9),
}

BUILT_BEFORE_FIT = {"schedule_free_adamw"}
"""Built before `fit` in both runs. Its `build` copies the weights into its momentum; plain Keras builds
it inside the step's first trace, which `tf.function` discards (a trace that creates variables is traced
again), so the copy never runs and a first step at learning rate 0 zeroes the weights (Keras 3.15). The
guard builds the optimizer before tracing (as Keras does under a distribution strategy), where the copy
runs: built first, both runs start alike."""

ROWS, TOKENS, VOCABULARY = 32, 4, 40


def _model(optimizer) -> keras.Model:
    keras.utils.set_random_seed(0)
    ids = keras.Input((TOKENS,), dtype="int32", name="ids")
    features = keras.Input((3,), name="features")
    embedded = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(VOCABULARY, 4, name="embed")(ids))
    hidden = keras.layers.Dense(4, activation="tanh", name="hidden")(keras.layers.Concatenate()([embedded, features]))
    model = keras.Model([ids, features], keras.layers.Dense(1, name="out")(hidden))
    model.compile(optimizer=optimizer, loss="mse")
    return model


def _batches():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCABULARY, (ROWS, TOKENS)).astype("int32")
    features = rng.standard_normal((ROWS, 3)).astype("float32")
    y = rng.standard_normal((ROWS, 1)).astype("float32")
    nan_label = y.copy()
    nan_label[5] = np.nan
    overflow = y.copy()  # finite labels whose squared error overflows float32
    overflow[2] = 3e38
    return {"clean": ([ids, features], y), "nan_label": ([ids, features], nan_label),
            "overflow": ([ids, features], overflow)}


def _state(model):
    return foreign.state_of(model, model.optimizer, metrics=False)


@pytest.mark.parametrize("hold_bytes", [None, 0], ids=["held", "gated"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_clean_step_is_plain_keras_and_a_rejected_one_changes_nothing(name, hold_bytes):
    batches = _batches()
    plain, guarded = _model(OPTIMIZERS[name]()), _model(OPTIMIZERS[name]())
    options = {} if hold_bytes is None else {"hold_bytes": hold_bytes}
    tfguard.guard(guarded, policy="skip", quarantine_dir=None, **options)
    if name in BUILT_BEFORE_FIT:
        for model in (plain, guarded):
            model.optimizer.build(model.trainable_variables)
    x, y = batches["clean"]
    for model in (plain, guarded):
        model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    assert foreign.bitwise_equal(_state(plain), _state(guarded)), "a clean step differs from plain Keras's"

    for bad in ("nan_label", "overflow"):
        before = _state(guarded)
        bad_x, bad_y = batches[bad]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tfguard.GuardWarning)
            history = guarded.fit(bad_x, bad_y, batch_size=ROWS, shuffle=False, verbose=0)
        assert history.history["guard_skipped"] == [1.0], bad
        assert foreign.bitwise_equal(before, _state(guarded)), f"a rejected {bad} step changed the state"

    for model in (plain, guarded):  # the skipped steps moved nothing: both go on alike
        model.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    assert foreign.bitwise_equal(_state(plain), _state(guarded)), "the steps after the rejected ones differ"


def test_a_nan_class_id_is_rejected_not_a_crash_of_the_loss_kernel():
    # Clipped into range a NaN stays NaN and casts to the index INT64_MIN: TensorFlow's sparse
    # cross-entropy kernel failed the whole step, under the guard as without it.
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.default_rng(0).standard_normal((16, 3)).astype("float32")
    y = np.arange(16, dtype="float32") % 4
    tfguard.guard(model, policy="skip", quarantine_dir=None)
    model.fit(x, y, batch_size=16, verbose=0)
    before = _state(model)
    y[3] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)
        history = model.fit(x, y, batch_size=16, verbose=0)
    assert history.history["guard_skipped"] == [1.0]
    assert foreign.bitwise_equal(before, _state(model))
    assert tfguard.guard_events(model)[-1].stage == "data"
