"""Programs shaped like the ones users bring (keras-io style), written without tfguard in mind.

Each builder returns a compiled model and its data; none knows about tfguard.
The firewall tests guard them as they are.

* `custom_step`: a subclass with its own `train_step` and one optimizer
  (keras-io "Customizing what happens in fit()"); `custom_step_mixed`, the
  same as a subclass built lazily, in mixed precision (float16 layers, a
  `LossScaleOptimizer`).
* `gan`: a DCGAN-style `keras.Model` with two optimizers, its own `compile`,
  its own `train_step`, loss trackers and no `call()` (keras-io "DCGAN").
* `vae`: a VAE compiled without a loss, computing reconstruction and KL
  losses in its own `train_step`, sampling with a `SeedGenerator`
  (keras-io "Variational AutoEncoder").
* `bn_model`: a functional model with `BatchNormalization`.
* `stateful_model`: a custom layer that counts what it sees in a
  non-trainable weight assigned in `call`.
* `loop_step`: the step of a hand-written training loop.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import layers, ops


class OwnTrainStep:
    """keras-io: a `train_step` override with one optimizer and the compiled loss."""

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply(gradients, self.trainable_variables)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


class CustomStep(OwnTrainStep, keras.Model):
    """A functional model with its own `train_step` (Keras makes its class a `Functional` one on first use)."""


def custom_step(seed: int = 0, jit_compile=False):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    h = layers.Dense(8, activation="relu")(inputs)
    outputs = layers.Dense(3, activation="softmax")(h)
    model = CustomStep(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                  jit_compile=jit_compile)
    rng = np.random.default_rng(seed)
    x = rng.random((64, 4), dtype=np.float32)
    y = (np.arange(64) % 3).astype("int64")
    return model, x, y


class MixedStep(OwnTrainStep, keras.Model):
    """A subclassed `custom_step` in mixed precision, built lazily by its first call (nothing before `fit`)."""

    def __init__(self):
        super().__init__()
        self.hidden = layers.Dense(8, activation="relu", dtype="mixed_float16")
        self.head = layers.Dense(3, activation="softmax", dtype="float32")

    def call(self, x, training=False):
        return self.head(self.hidden(x))


def custom_step_mixed(seed: int = 0, jit_compile=False):
    """`MixedStep` with a `LossScaleOptimizer` (keras-io "Mixed precision")."""
    keras.utils.set_random_seed(seed)
    model = MixedStep()
    model.compile(optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam()),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"], jit_compile=jit_compile)
    rng = np.random.default_rng(seed)
    x = rng.random((64, 4), dtype=np.float32)
    y = (np.arange(64) % 3).astype("int64")
    return model, x, y


class GAN(keras.Model):
    """keras-io DCGAN: two optimizers, a custom compile and train_step, no call()."""

    def __init__(self, discriminator, generator, latent_dim):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.latent_dim = latent_dim
        self.seed_generator = keras.random.SeedGenerator(1337)

    def compile(self, d_optimizer, g_optimizer, loss_fn, **kwargs):
        super().compile(**kwargs)
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn
        self.d_loss_metric = keras.metrics.Mean(name="d_loss")
        self.g_loss_metric = keras.metrics.Mean(name="g_loss")

    @property
    def metrics(self):
        return [self.d_loss_metric, self.g_loss_metric]

    def train_step(self, real_images):
        batch_size = ops.shape(real_images)[0]
        random_latent_vectors = keras.random.normal(
            shape=(batch_size, self.latent_dim), seed=self.seed_generator
        )
        generated_images = self.generator(random_latent_vectors)
        combined_images = ops.concatenate([generated_images, real_images], axis=0)
        labels = ops.concatenate([ops.ones((batch_size, 1)), ops.zeros((batch_size, 1))], axis=0)
        labels += 0.05 * tf.random.uniform(tf.shape(labels))
        with tf.GradientTape() as tape:
            predictions = self.discriminator(combined_images)
            d_loss = self.loss_fn(labels, predictions)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
        random_latent_vectors = keras.random.normal(
            shape=(batch_size, self.latent_dim), seed=self.seed_generator
        )
        misleading_labels = ops.zeros((batch_size, 1))
        with tf.GradientTape() as tape:
            predictions = self.discriminator(self.generator(random_latent_vectors))
            g_loss = self.loss_fn(misleading_labels, predictions)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
        self.d_loss_metric.update_state(d_loss)
        self.g_loss_metric.update_state(g_loss)
        return {"d_loss": self.d_loss_metric.result(), "g_loss": self.g_loss_metric.result()}


def gan(seed: int = 0, jit_compile=False, images: int = 64, size: int = 8, latent_dim: int = 4):
    keras.utils.set_random_seed(seed)
    discriminator = keras.Sequential(
        [keras.Input((size, size, 1)), layers.Conv2D(4, 3, strides=2, padding="same"),
         layers.LeakyReLU(negative_slope=0.2), layers.Flatten(), layers.Dense(1, activation="sigmoid")],
        name="discriminator",
    )
    generator = keras.Sequential(
        [keras.Input((latent_dim,)), layers.Dense(size * size * 2), layers.Reshape((size, size, 2)),
         layers.Conv2D(1, 3, padding="same", activation="sigmoid")],
        name="generator",
    )
    model = GAN(discriminator, generator, latent_dim)
    model.compile(
        d_optimizer=keras.optimizers.Adam(1e-3),
        g_optimizer=keras.optimizers.Adam(1e-3),
        loss_fn=keras.losses.BinaryCrossentropy(),
        jit_compile=jit_compile,
    )
    x = np.random.default_rng(seed).random((images, size, size, 1), dtype=np.float32)
    return model, x


class Sampling(layers.Layer):
    """keras-io VAE: z = mean + exp(log_var / 2) * epsilon, with a seeded generator."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, inputs):
        z_mean, z_log_var = inputs
        epsilon = keras.random.normal(shape=ops.shape(z_mean), seed=self.seed_generator)
        return z_mean + ops.exp(0.5 * z_log_var) * epsilon


class VAE(keras.Model):
    """keras-io VAE: compiled without a loss; the loss lives in train_step."""

    def __init__(self, encoder, decoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.decoder = decoder
        self.total_loss_tracker = keras.metrics.Mean(name="total_loss")
        self.reconstruction_loss_tracker = keras.metrics.Mean(name="reconstruction_loss")
        self.kl_loss_tracker = keras.metrics.Mean(name="kl_loss")

    @property
    def metrics(self):
        return [self.total_loss_tracker, self.reconstruction_loss_tracker, self.kl_loss_tracker]

    def train_step(self, data):
        with tf.GradientTape() as tape:
            z_mean, z_log_var, z = self.encoder(data)
            reconstruction = self.decoder(z)
            reconstruction_loss = ops.mean(
                ops.sum(keras.losses.binary_crossentropy(data, reconstruction), axis=(1, 2))
            )
            kl_loss = -0.5 * (1 + z_log_var - ops.square(z_mean) - ops.exp(z_log_var))
            kl_loss = ops.mean(ops.sum(kl_loss, axis=1))
            total_loss = reconstruction_loss + kl_loss
        grads = tape.gradient(total_loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        self.total_loss_tracker.update_state(total_loss)
        self.reconstruction_loss_tracker.update_state(reconstruction_loss)
        self.kl_loss_tracker.update_state(kl_loss)
        return {
            "loss": self.total_loss_tracker.result(),
            "reconstruction_loss": self.reconstruction_loss_tracker.result(),
            "kl_loss": self.kl_loss_tracker.result(),
        }


def vae(seed: int = 0, jit_compile=False, images: int = 64, size: int = 8, latent_dim: int = 2):
    keras.utils.set_random_seed(seed)
    encoder_inputs = keras.Input((size, size, 1))
    h = layers.Flatten()(encoder_inputs)
    h = layers.Dense(16, activation="relu")(h)
    z_mean = layers.Dense(latent_dim, name="z_mean")(h)
    z_log_var = layers.Dense(latent_dim, name="z_log_var")(h)
    z = Sampling()([z_mean, z_log_var])
    encoder = keras.Model(encoder_inputs, [z_mean, z_log_var, z], name="encoder")
    latent_inputs = keras.Input((latent_dim,))
    h = layers.Dense(size * size, activation="sigmoid")(latent_inputs)
    decoder = keras.Model(latent_inputs, layers.Reshape((size, size, 1))(h), name="decoder")
    model = VAE(encoder, decoder)
    model.compile(optimizer=keras.optimizers.Adam(), jit_compile=jit_compile)
    x = np.random.default_rng(seed).random((images, size, size, 1), dtype=np.float32)
    return model, x


def bn_model(seed: int = 0, jit_compile=False):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    h = layers.Dense(8)(inputs)
    h = layers.BatchNormalization(name="bn")(h)
    h = layers.Activation("relu")(h)
    outputs = layers.Dense(3, activation="softmax")(h)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                  jit_compile=jit_compile)
    return model


class Counter(layers.Layer):
    """A custom stateful layer: counts the examples and sums the inputs it saw in training."""

    def build(self, input_shape):
        self.seen = self.add_weight(shape=(), initializer="zeros", trainable=False, name="seen")
        self.total = self.add_weight(shape=(input_shape[-1],), initializer="zeros", trainable=False,
                                     name="total")

    def call(self, inputs, training=False):
        if training:
            self.seen.assign_add(ops.cast(ops.shape(inputs)[0], "float32"))
            self.total.assign_add(ops.sum(inputs, axis=0))
        return inputs


def stateful_model(seed: int = 0, jit_compile=False):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    h = Counter(name="counter")(inputs)
    h = layers.Dense(8, activation="relu")(h)
    outputs = layers.Dense(3, activation="softmax")(h)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", jit_compile=jit_compile)
    return model


def loop_step(model, optimizer, loss_fn):
    """keras-io "Writing a training loop from scratch": one `tf.function` step of a hand-written loop."""

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return train_step


def state_of(*owners, metrics: bool = True) -> list[np.ndarray]:
    """Every variable of the models and optimizers given (weights, slots, seeds, and metrics).

    `fit` resets the metrics at each epoch: compare across `fit` calls with `metrics=False`.
    """
    values, seen = [], set()
    for owner in owners:
        variables = list(owner.variables)
        if isinstance(owner, keras.Model) and metrics:
            variables += list(owner.metrics_variables)
        for variable in variables:
            if id(variable) in seen:
                continue
            seen.add(id(variable))
            values.append(np.array(keras.ops.convert_to_numpy(variable)))
    return values


def bitwise_equal(before: list[np.ndarray], after: list[np.ndarray]) -> bool:
    return len(before) == len(after) and all(
        a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        for a, b in zip(before, after)
    )
