"""Small real programs the compatibility tests train: a BatchNormalization classifier, a custom `train_step`."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf


def bn_classifier(jit_compile: bool = False) -> keras.Model:
    """Dense, BatchNormalization (assigns in the forward pass), softmax; Adam; accuracy."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu", name="hidden"),
                              keras.layers.BatchNormalization(name="bn"),
                              keras.layers.Dense(3, activation="softmax", name="out")], name="bn_classifier")
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], jit_compile=jit_compile)
    return model


def classification_data(n: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)).astype("float32")
    return x, (x[:, :3].argmax(1)).astype("int64")


def state_of(*owners) -> list[np.ndarray]:
    """Every variable of the models / optimizers given (weights, BN statistics, metrics, slots), as arrays."""
    found = []
    for owner in owners:
        variables = owner.variables
        if isinstance(owner, keras.Model):
            variables = [*variables, *(v for m in owner.metrics for v in m.variables)]
        found.extend(np.array(keras.ops.convert_to_numpy(v)) for v in variables)
    return found


def bitwise_equal(before: list[np.ndarray], after: list[np.ndarray]) -> bool:
    return len(before) == len(after) and all(a.tobytes() == b.tobytes() for a, b in zip(before, after))


class CustomStep(keras.Model):
    """A keras-io-style model with its own `train_step` (GradientTape, `apply_gradients`, its own metric)."""

    def __init__(self):
        super().__init__(name="custom_step")
        self.hidden = keras.layers.Dense(8, activation="relu", name="hidden")
        self.out = keras.layers.Dense(3, name="logits")
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.loss_tracker = keras.metrics.Mean(name="loss")

    def call(self, x, training=False):
        return self.out(self.hidden(x))

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self(x, training=True))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}

    @property
    def metrics(self):
        return [self.loss_tracker]


def custom_step_model(jit_compile: bool = False) -> keras.Model:
    keras.utils.set_random_seed(0)
    model = CustomStep()
    model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=jit_compile)
    return model
