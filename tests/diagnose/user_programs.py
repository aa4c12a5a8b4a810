"""Training scripts shaped like the ones users bring, run under `tfguard run` as they are.

Each is a complete script (it knows nothing about tfguard) on data scikit-learn
ships: the healthy ones cover the shapes DESIGN.md lists (a custom
`train_step`, a GAN, a VAE, dict inputs normalized inside the model, token ids
into an `Embedding`, `fit` in a loop, a `PyDataset`, mixed precision, a 4-feature
softmax MLP); the buggy ones each carry one mistake and name the root cause a
diagnosis must list first. These are the project's own programs, written here;
the held-out benchmark programs stay out of the repository.

`run(program, logdir)` runs one through `tfguard.attach.run_script` and
returns its `AttachResult`.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

PRELUDE = """
import numpy as np
import keras
import tensorflow as tf
from sklearn.datasets import load_digits, load_iris, load_diabetes, load_breast_cancer
keras.utils.set_random_seed(0)
digits_x, digits_y = load_digits(return_X_y=True)
digits_x = digits_x.astype("float32")
"""


@dataclasses.dataclass(frozen=True)
class UserProgram:
    name: str
    cause: str | None  # the symptom id a diagnosis must list first; None: healthy
    body: str
    also: tuple = ()  # other ids that are true of this program (not false alarms)

    def source(self) -> str:
        return PRELUDE + textwrap.dedent(self.body)


HEALTHY = [
    UserProgram("iris_softmax_mlp", None, """
        x, y = load_iris(return_X_y=True)
        x = ((x - x.mean(0)) / x.std(0)).astype("float32")
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(3, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(x, y, epochs=30, batch_size=16, validation_split=0.2, verbose=0)
    """),
    UserProgram("token_ids_embedding", None, """
        rng = np.random.default_rng(0)
        tokens = rng.integers(1, 500, size=(1200, 20))
        labels = (tokens[:, :5].mean(1) > 250).astype("int64")
        model = keras.Sequential([keras.Input((20,), dtype="int32"), keras.layers.Embedding(500, 16),
                                  keras.layers.GlobalAveragePooling1D(),
                                  keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(2, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(tokens, labels, epochs=6, batch_size=32, validation_split=0.2, verbose=0)
    """),
    UserProgram("dict_inputs_normalization", None, """
        x, y = load_diabetes(return_X_y=True)
        raw = {"age": (x[:, 0] * 100 + 50).astype("float32")[:, None],
               "bmi": (x[:, 2] * 200 + 26).astype("float32")[:, None],
               "bp": (x[:, 3] * 300 + 95).astype("float32")[:, None],
               "sex": np.where(x[:, 1] > 0, "f", "m")[:, None]}
        y = ((y - y.mean()) / y.std()).astype("float32")
        inputs = {k: keras.Input((1,), name=k, dtype="string" if k == "sex" else "float32") for k in raw}
        parts = []
        for k in ("age", "bmi", "bp"):
            norm = keras.layers.Normalization(name=f"norm_{k}")
            norm.adapt(raw[k])
            parts.append(norm(inputs[k]))
        lookup = keras.layers.StringLookup(vocabulary=["f", "m"], output_mode="one_hot", name="sex_lookup")
        parts.append(lookup(inputs["sex"]))
        h = keras.layers.Dense(16, activation="relu")(keras.layers.Concatenate()(parts))
        model = keras.Model(inputs, keras.layers.Dense(1)(h))
        model.compile(optimizer="adam", loss="mse")
        ds = tf.data.Dataset.from_tensor_slices((raw, y)).shuffle(500, seed=0)
        model.fit(ds.skip(80).batch(32), validation_data=ds.take(80).batch(32), epochs=12, verbose=0)
    """),
    UserProgram("custom_train_step", None, """
        class Custom(keras.Model):
            def train_step(self, data):
                x, y = data
                with tf.GradientTape() as tape:
                    y_pred = self(x, training=True)
                    loss = self.compute_loss(y=y, y_pred=y_pred)
                grads = tape.gradient(loss, self.trainable_variables)
                self.optimizer.apply(grads, self.trainable_variables)
                for m in self.metrics:
                    m.update_state(loss) if m.name == "loss" else m.update_state(y, y_pred)
                return {m.name: m.result() for m in self.metrics}
        inputs = keras.Input((64,))
        h = keras.layers.Dense(32, activation="relu")(keras.layers.Rescaling(1 / 16)(inputs))
        model = Custom(inputs, keras.layers.Dense(10, activation="softmax")(h))
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(digits_x, digits_y, epochs=6, batch_size=32, validation_split=0.2, verbose=0)
    """),
    UserProgram("gan_two_optimizers", None, """
        class GAN(keras.Model):
            def __init__(self):
                super().__init__()
                self.d = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32),
                                           keras.layers.LeakyReLU(0.2), keras.layers.Dense(1)])
                self.g = keras.Sequential([keras.Input((8,)), keras.layers.Dense(32),
                                           keras.layers.LeakyReLU(0.2),
                                           keras.layers.Dense(64, activation="sigmoid")])
                self.seed = keras.random.SeedGenerator(1)
            def compile(self):
                super().compile()
                self.d_opt, self.g_opt = keras.optimizers.Adam(1e-3), keras.optimizers.Adam(1e-3)
                self.bce = keras.losses.BinaryCrossentropy(from_logits=True)
                self.d_loss = keras.metrics.Mean(name="d_loss")
                self.g_loss = keras.metrics.Mean(name="g_loss")
            @property
            def metrics(self):
                return [self.d_loss, self.g_loss]
            def train_step(self, real):
                n = tf.shape(real)[0]
                fake = self.g(keras.random.normal((n, 8), seed=self.seed))
                with tf.GradientTape() as tape:
                    logits = self.d(tf.concat([fake, real], 0))
                    d_loss = self.bce(tf.concat([tf.zeros((n, 1)), tf.ones((n, 1))], 0), logits)
                grads = tape.gradient(d_loss, self.d.trainable_weights)
                self.d_opt.apply_gradients(zip(grads, self.d.trainable_weights))
                with tf.GradientTape() as tape:
                    g_loss = self.bce(tf.ones((n, 1)), self.d(self.g(keras.random.normal((n, 8), seed=self.seed))))
                grads = tape.gradient(g_loss, self.g.trainable_weights)
                self.g_opt.apply_gradients(zip(grads, self.g.trainable_weights))
                self.d_loss.update_state(d_loss)
                self.g_loss.update_state(g_loss)
                return {"d_loss": self.d_loss.result(), "g_loss": self.g_loss.result()}
        gan = GAN()
        gan.compile()
        gan.fit(digits_x / 16.0, epochs=4, batch_size=64, verbose=0)
    """),
    UserProgram("fit_in_a_loop", None, """
        model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16),
                                  keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        for epoch in range(8):
            model.fit(digits_x, digits_y, epochs=1, batch_size=64, verbose=0)
    """),
    UserProgram("pydataset_cnn", None, """
        images = (digits_x.reshape(-1, 8, 8, 1) * 16).astype("uint8")
        class Batches(keras.utils.PyDataset):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
            def __len__(self):
                return len(images) // 32
            def __getitem__(self, i):
                return images[i * 32:(i + 1) * 32], digits_y[i * 32:(i + 1) * 32]
        model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Rescaling(1 / 255),
                                  keras.layers.Conv2D(16, 3, activation="relu"),
                                  keras.layers.Flatten(), keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(Batches(), epochs=5, verbose=0)
    """),
    UserProgram("mixed_precision", None, """
        keras.mixed_precision.set_global_policy("mixed_float16")
        x, y = load_breast_cancer(return_X_y=True)
        x = ((x - x.mean(0)) / x.std(0)).astype("float32")
        model = keras.Sequential([keras.Input((30,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(1, activation="sigmoid", dtype="float32")])
        model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
        model.fit(x, y.astype("float32"), epochs=10, batch_size=32, validation_split=0.2, verbose=0)
        keras.mixed_precision.set_global_policy("float32")
    """),
]

BUGGY = [
    UserProgram("raw_pixels_sgd", "unnormalized_input", """
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy")
        model.fit(digits_x * 16, digits_y, epochs=4, batch_size=32, verbose=0)
    """, also=("nonfinite", "learning_rate", "dead_relu", "no_learning", "exploding_gradient",
               "collapsed_output")),
    UserProgram("learning_rate_far_too_high", "learning_rate", """
        model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16),
                                  keras.layers.Dense(64, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer=keras.optimizers.Adam(1.0), loss="sparse_categorical_crossentropy")
        model.fit(digits_x, digits_y, epochs=5, batch_size=32, verbose=0)
    """, also=("dead_relu", "no_learning", "nonfinite", "oscillating_loss", "exploding_gradient",
               "collapsed_output")),
    UserProgram("fractional_labels", "label_range", """
        model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16),
                                  keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(digits_x, digits_y / 255.0, epochs=4, batch_size=32, verbose=0)
    """, also=("nonfinite", "no_learning")),
    UserProgram("labels_one_to_ten", "label_range", """
        model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16),
                                  keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(digits_x, digits_y + 1, epochs=4, batch_size=32, verbose=0)
    """, also=("nonfinite", "no_learning")),
    UserProgram("softmax_multi_hot", "loss_activation_mismatch", """
        targets = np.stack([digits_y % 2 == 0, digits_y > 4, digits_y % 3 == 0], 1).astype("float32")
        model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16),
                                  keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(3, activation="softmax")])
        model.compile(optimizer="adam", loss="categorical_crossentropy")
        model.fit(digits_x, targets, epochs=4, batch_size=32, verbose=0)
    """, also=("no_learning", "slow_convergence")),
    UserProgram("relu_output_crossentropy", "loss_activation_mismatch", """
        model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16),
                                  keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(10, activation="relu")])
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy())
        model.fit(digits_x, digits_y, epochs=4, batch_size=32, verbose=0)
    """, also=("nonfinite", "no_learning", "dead_relu", "slow_convergence")),
    UserProgram("learning_rate_far_too_low", "learning_rate", """
        model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16),
                                  keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer=keras.optimizers.SGD(1e-7), loss="sparse_categorical_crossentropy")
        model.fit(digits_x, digits_y, epochs=5, batch_size=32, verbose=0)
    """, also=("no_learning", "slow_convergence")),
]


def run(program: UserProgram, root: Path):
    """Runs a program as `tfguard run SCRIPT` would; returns its `AttachResult`."""
    from tfguard.attach import run_script

    folder = Path(root) / program.name
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "train.py"
    script.write_text(program.source())
    return run_script(script, logdir=folder / "runs", report=folder / "report.json", html=None)


__all__ = ["BUGGY", "HEALTHY", "UserProgram", "run"]
