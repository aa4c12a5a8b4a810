"""Small REAL training programs, each built to show one symptom (or none).

Every program trains a Keras model for a few seconds on scikit-learn data
(the real 8x8 digits, or synthetic moons / regression sets) and writes the
tags of `tfguard._tags` with `tf.summary` through `TagWriter`: epoch metrics,
the per-step signals the instrumented train step computes
(`tfguard._firewall.instrument`), the model description (`config/model`),
the hparams and the static pipeline findings (`config/lint`). A
`LiveDiagnosis` rides along on the same `fit`, so each program yields both
an event-file run and the live findings.

`STOCK` programs use the stock `keras.callbacks.TensorBoard` callback instead.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits, make_moons, make_regression
from tensorboard.plugins.hparams import api as hp

from tfguard import _tags, invariants
from tfguard._findings import strict_json
from tfguard._firewall import instrument
from tfguard.diagnose import LiveDiagnosis

EVERY = 2  # scalars_every of the instrumented step


# -- data -----------------------------------------------------------------------
_CACHE: dict = {}


def digits(scale: float = 1 / 16):
    """The real sklearn digits, shuffled, split 1300 / 300, pixels times `scale`."""
    if "digits" not in _CACHE:
        x, y = load_digits(return_X_y=True)
        order = np.random.default_rng(0).permutation(len(x))
        _CACHE["digits"] = (x[order].astype("float32"), y[order].astype("int64"))
    x, y = _CACHE["digits"]
    x = x * scale
    return (x[:1300], y[:1300]), (x[1300:1600], y[1300:1600])


def moons(n=1200, noise=0.2):
    x, y = make_moons(n, noise=noise, random_state=0)
    x = ((x - x.mean(0)) / x.std(0)).astype("float32")
    return (x[:900], y[:900].astype("float32")), (x[900:], y[900:].astype("float32"))


def regression(n=1000, target_scale=1.0):
    x, y = make_regression(n, n_features=10, noise=5.0, random_state=0)
    x = ((x - x.mean(0)) / x.std(0)).astype("float32")
    y = (target_scale * (y - y.mean()) / y.std()).astype("float32")
    return (x[:800], y[:800]), (x[800:], y[800:])


# -- the logger stand-in -----------------------------------------------------------
class TagWriter(keras.callbacks.Callback):
    """Writes the tags of tfguard._tags with tf.summary, the static lint findings it is given, and the invariant records.

    A plain writer over the instrumented step's records (not tfguard's
    Logger), so the rules are also tested on event files another writer made.
    """

    def __init__(self, logdir: str, hparams: dict, every: int = EVERY, lint=None):
        super().__init__()
        self.writer = tf.summary.create_file_writer(logdir)
        self.hparams = hparams
        self.every = every
        self.lint = lint or []

    def set_model(self, model):
        super().set_model(model)
        instrument(model).subscribe(self._on_record, scalars_every=self.every)

    def _on_invariant(self, record):
        with self.writer.as_default():
            tf.summary.text(_tags.INVARIANT_RECORDS, json.dumps(strict_json(record)),
                            step=record["step"])

    def _step(self):
        return instrument(self.model).global_step()

    def _on_record(self, record):
        with self.writer.as_default():
            for tag, value in record.scalars.items():
                tf.summary.scalar(tag, float(value), step=record.step)
            if record.moved and "loss" in record.logs:
                tf.summary.scalar(_tags.batch("loss"), record.logs["loss"], step=record.step)

    def on_train_begin(self, logs=None):
        from tfguard.lint._describe import describe_model

        with self.writer.as_default():
            hp.hparams(self.hparams)
            tf.summary.text(_tags.CONFIG_MODEL, json.dumps(describe_model(self.model)), step=0)
            if self.lint:
                tf.summary.text("config/lint", json.dumps([f.to_dict() for f in self.lint]), step=0)
        watch = invariants.watch(self.model, step=self._step)  # as the Logger listens to it
        watch.add_listener(self._on_invariant)
        watch.begin_fit()

    def on_epoch_end(self, epoch, logs=None):
        invariants.watch(self.model).end_epoch(epoch)
        step = self._step()
        with self.writer.as_default():
            tf.summary.scalar(_tags.EPOCH, epoch, step=step)
            for name, value in (logs or {}).items():
                tf.summary.scalar(_tags.from_keras_log(name), float(value), step=step)
        self.writer.flush()

    def on_train_end(self, logs=None):
        instrument(self.model).unsubscribe(self._on_record)
        invariants.watch(self.model).remove_listener(self._on_invariant)
        self.writer.close()


# -- the programs ------------------------------------------------------------------
@dataclasses.dataclass
class Program:
    """One training program: `build()` returns `(model, fit_kwargs, hparams, lint)`."""

    name: str
    target: str | None  # the symptom it is built to show; None when healthy
    build: Callable[[], tuple]
    stock: bool = False  # log with keras.callbacks.TensorBoard instead of TagWriter


def _mlp(inputs, hidden, out_units, out_act, act="relu", **dense_kw):
    layers = [keras.Input((inputs,))]
    for i, units in enumerate(hidden):
        layers.append(keras.layers.Dense(units, activation=act, name=f"hidden_{i}", **dense_kw))
    layers.append(keras.layers.Dense(out_units, activation=out_act, name="out"))
    return keras.Sequential(layers)


def _compile(model, opt, loss, metrics=("accuracy",)):
    model.compile(optimizer=opt, loss=loss, metrics=list(metrics))
    return model


def healthy_digits():
    (x, y), val = digits()
    model = _compile(_mlp(64, [64, 32], 10, "softmax"), keras.optimizers.Adam(1e-3),
                     "sparse_categorical_crossentropy")
    return model, dict(x=x, y=y, validation_data=val, epochs=8, batch_size=32), {"lr": 1e-3, "model": "mlp"}, None


def healthy_moons():
    (x, y), val = moons()
    model = _compile(_mlp(2, [32, 32], 1, "sigmoid", act="tanh"), keras.optimizers.Adam(1e-2),
                     "binary_crossentropy")
    return model, dict(x=x, y=y, validation_data=val, epochs=10, batch_size=32), {"lr": 1e-2, "data": "moons"}, None


def healthy_regression():
    (x, y), val = regression()
    model = _compile(_mlp(10, [32, 32], 1, None), keras.optimizers.Adam(3e-3), "mse", metrics=("mae",))
    return model, dict(x=x, y=y, validation_data=val, epochs=10, batch_size=32), {"lr": 3e-3, "data": "regression"}, None


def healthy_cnn_rescaling():
    (x, y), val = digits(scale=1.0)  # raw 0..16 pixels, rescaled inside the model
    model = keras.Sequential([
        keras.Input((8, 8, 1)), keras.layers.Rescaling(1 / 16, name="rescale"),
        keras.layers.Conv2D(16, 3, activation="relu", name="conv"),
        keras.layers.Flatten(name="flat"), keras.layers.Dense(10, name="logits"),
    ])
    _compile(model, keras.optimizers.Adam(2e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model, dict(x=x.reshape(-1, 8, 8, 1), y=y, validation_data=(val[0].reshape(-1, 8, 8, 1), val[1]),
                       epochs=6, batch_size=32), {"lr": 2e-3, "model": "cnn"}, None


def buggy_nonfinite():
    (x, y), val = regression(target_scale=100.0)
    model = _compile(_mlp(10, [32], 1, None), keras.optimizers.SGD(0.05), "mse", metrics=())
    return model, dict(x=x, y=y, validation_data=val, epochs=6, batch_size=32), {"lr": 0.05}, None


def buggy_exploding():
    (x, y), val = regression()
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(1, name="linear")])
    _compile(model, keras.optimizers.SGD(0.9), "mse", metrics=())
    return model, dict(x=x, y=y, validation_data=val, epochs=2, batch_size=32), {"lr": 0.9}, None


def buggy_vanishing():
    (x, y), val = digits()
    model = _compile(_mlp(64, [32] * 8, 10, "softmax", act="sigmoid"), keras.optimizers.SGD(0.05),
                     "sparse_categorical_crossentropy")
    return model, dict(x=x, y=y, validation_data=val, epochs=4, batch_size=32), {"lr": 0.05, "depth": 8}, None


def buggy_dead_relu():
    (x, y), val = digits()
    model = keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(64, activation="relu", name="hidden_0"),
        keras.layers.Dense(64, activation="relu", name="hidden_1", bias_initializer=keras.initializers.Constant(-4.0)),
        keras.layers.Dense(10, activation="softmax", name="out"),
    ])
    _compile(model, keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
    return model, dict(x=x, y=y, validation_data=val, epochs=4, batch_size=32), {"bias_init": -4.0}, None


def buggy_saturated():
    (x, y), val = digits()
    x, xv = (x - 0.3) / 0.4, (val[0] - 0.3) / 0.4
    model = _compile(_mlp(64, [64, 64], 10, "softmax", act="tanh",
                          kernel_initializer=keras.initializers.RandomNormal(stddev=1.5)),
                     keras.optimizers.SGD(0.01), "sparse_categorical_crossentropy")
    return model, dict(x=x, y=y, validation_data=(xv, val[1]), epochs=4, batch_size=32), {"init_std": 1.5}, None


def buggy_oscillating():
    (x, y), val = digits()
    model = _compile(_mlp(64, [64], 10, "softmax"), keras.optimizers.SGD(0.5, momentum=0.9),
                     "sparse_categorical_crossentropy")
    return model, dict(x=x, y=y, validation_data=val, epochs=15, batch_size=32), {"lr": 0.5, "momentum": 0.9}, None


def buggy_slow():
    (x, y), val = digits()
    model = _compile(_mlp(64, [64], 10, "softmax"), keras.optimizers.SGD(2e-3),
                     "sparse_categorical_crossentropy")
    return model, dict(x=x, y=y, validation_data=val, epochs=8, batch_size=32), {"lr": 2e-3}, None


def buggy_no_learning():
    (x, y), val = digits()
    model = _compile(_mlp(64, [64], 10, "softmax"), keras.optimizers.Adam(1e-7),
                     "sparse_categorical_crossentropy")
    return model, dict(x=x, y=y, validation_data=val, epochs=5, batch_size=32), {"lr": 1e-7}, None


def buggy_overfitting():
    (x, y), val = digits()
    rng = np.random.default_rng(1)
    x, y = x[:150], y[:150].copy()
    flip = rng.random(len(y)) < 0.3
    y[flip] = rng.integers(0, 10, flip.sum())
    model = _compile(_mlp(64, [256, 256], 10, "softmax"), keras.optimizers.Adam(3e-3),
                     "sparse_categorical_crossentropy")
    return model, dict(x=x, y=y, validation_data=val, epochs=20, batch_size=32), {"n_train": 150, "label_noise": 0.3}, None


def buggy_loss_activation():
    (x, y), val = digits()
    model = _compile(_mlp(64, [64], 10, None), keras.optimizers.Adam(1e-3),
                     keras.losses.SparseCategoricalCrossentropy(from_logits=False))
    return model, dict(x=x, y=y, validation_data=val, epochs=4, batch_size=32), {"from_logits": False}, None


def buggy_learning_rate():
    (x, y), val = digits()
    model = _compile(_mlp(64, [64], 10, "softmax"), keras.optimizers.SGD(3.0),
                     "sparse_categorical_crossentropy")
    return model, dict(x=x, y=y, validation_data=val, epochs=4, batch_size=32), {"lr": 3.0}, None


def buggy_unnormalized():
    (x, y), val = digits(scale=16.0)  # 0..256 raw "pixel" values
    model = _compile(_mlp(64, [64], 10, "softmax"), keras.optimizers.Adam(1e-3),
                     "sparse_categorical_crossentropy")
    return model, dict(x=x, y=y, validation_data=val, epochs=4, batch_size=32), {"scale": 16.0}, None


def buggy_label_range():
    (x, y), val = moons()
    model = _compile(_mlp(2, [32], 1, "sigmoid"), keras.optimizers.Adam(1e-2), "binary_crossentropy")
    return model, dict(x=x, y=2 * y - 1, validation_data=(val[0], 2 * val[1] - 1), epochs=4,
                       batch_size=32), {"labels": "-1/+1"}, None


def buggy_pipeline_order():
    from tfguard.lint._dataset import lint_dataset

    (x, y), val = digits()
    order = np.argsort(y, kind="stable")
    ds = tf.data.Dataset.from_tensor_slices((x[order], y[order])).batch(16).shuffle(100)
    model = _compile(_mlp(64, [64], 10, "softmax"), keras.optimizers.Adam(1e-3),
                     "sparse_categorical_crossentropy")
    return model, dict(x=ds, validation_data=val, epochs=4, shuffle=False), {"pipeline": "batch().shuffle()"}, lint_dataset(ds)


def buggy_loss_spike():
    """Ten passes over the digits in one stream; three batches late in it hold half a batch of wrong labels.

    Late: the window of a spike (the last 128 logged points, every second
    step) must have left the steep first descent, whose spread hides a
    threefold jump.
    """
    (x, y), val = digits()
    rng = np.random.default_rng(3)
    order = np.concatenate([rng.permutation(len(x))[:len(x) // 32 * 32] for _ in range(10)])
    x, y = x[order], y[order].copy()
    for batch in (330, 360, 390):
        rows = batch * 32 + np.arange(0, 32, 2)
        y[rows] = (y[rows] + 5) % 10
    model = _compile(_mlp(64, [64, 32], 10, "softmax"), keras.optimizers.Adam(1e-3),
                     "sparse_categorical_crossentropy")
    return model, dict(x=x, y=y, validation_data=val, epochs=1, batch_size=32, shuffle=False), \
        {"mislabelled_batches": 3}, None


PROGRAMS = [
    Program("healthy_digits", None, healthy_digits),
    Program("healthy_moons", None, healthy_moons),
    Program("healthy_regression", None, healthy_regression),
    Program("healthy_cnn_rescaling", None, healthy_cnn_rescaling),
    Program("nonfinite", "nonfinite", buggy_nonfinite),
    Program("exploding_gradient", "exploding_gradient", buggy_exploding),
    Program("vanishing_gradient", "vanishing_gradient", buggy_vanishing),
    Program("dead_relu", "dead_relu", buggy_dead_relu),
    Program("saturated_activation", "saturated_activation", buggy_saturated),
    Program("oscillating_loss", "oscillating_loss", buggy_oscillating),
    Program("slow_convergence", "slow_convergence", buggy_slow),
    Program("no_learning", "no_learning", buggy_no_learning),
    Program("overfitting", "overfitting", buggy_overfitting),
    Program("loss_activation_mismatch", "loss_activation_mismatch", buggy_loss_activation),
    Program("unnormalized_input", "unnormalized_input", buggy_unnormalized),
    Program("label_range", "label_range", buggy_label_range),
    Program("pipeline_order", "pipeline_order", buggy_pipeline_order),
    Program("learning_rate", "learning_rate", buggy_learning_rate),
    Program("loss_spike", "loss_spike", buggy_loss_spike),
]

STOCK = [
    Program("stock_healthy_digits", None, healthy_digits, stock=True),
    Program("stock_no_learning", "no_learning", buggy_no_learning, stock=True),
    Program("stock_overfitting", "overfitting", buggy_overfitting, stock=True),
]


def run_program(program: Program, logdir: str, seed: int = 0) -> LiveDiagnosis:
    """Trains `program`, writing its run under `logdir/<name>`; returns its LiveDiagnosis."""
    keras.utils.set_random_seed(seed)
    model, fit_kwargs, hparams, lint = program.build()
    run_dir = os.path.join(logdir, program.name)
    live = LiveDiagnosis(run=program.name, hparams=hparams, lint=lint, scalars_every=EVERY,
                         instrument=not program.stock)
    if program.stock:
        logger = keras.callbacks.TensorBoard(run_dir, histogram_freq=1, update_freq="epoch")
    else:
        logger = TagWriter(run_dir, hparams, lint=lint)
    model.fit(**fit_kwargs, verbose=0, callbacks=[logger, live])
    return live
