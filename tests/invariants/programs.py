"""Programs shaped like keras-io examples, each with one silent bug, and their healthy twins.

Every builder returns `(model, x, y)`: a compiled model and a small random
stand-in for the example's data (the shapes the example uses, scaled down).
The bug is the one a person found by hand (issue 23); the twin is the same
program as the example writes it correctly.

- `distiller(frozen)`: keras-io "Knowledge Distillation" (a `Distiller`
  with its own `compute_loss` calling the teacher); the bug: the teacher is
  not frozen, so the optimizer trains it.
- `recommender(rowwise)`: keras-io "Collaborative Filtering for Movie
  Recommendations" (`RecommenderNet`); the bug: `ops.tensordot(u, m, 2)`
  sums over the batch axis too.
- `siamese(dead)`: keras-io "Image similarity estimation using a Siamese
  Network with a triplet loss" (`SiameseModel` with its own `train_step`);
  the bug: the embedding's hidden ReLUs are dead (a shifted bias, as a large
  learning rate leaves them), so every embedding is the same.
- `hardcoded_training(layer, hardcoded)`: a subclassed classifier that passes
  `training=True` to its Dropout or BatchNormalization.
- `label_free_loss(ignores)`: a loss function that never reads `y_true`.
- `label_free_metric(ignores)`: a hand-written accuracy comparing `y_pred` with itself.
- `rounded_branch(rounded)`: a functional model with `ops.round` on the path
  of one branch, which no gradient crosses.
- `healthy_cnn()`: a functional CNN with BatchNormalization and Dropout.

The healthy programs of `tests/firewall/foreign.py` (a DCGAN and a VAE
without `call()`, a custom `train_step`, a stateful custom layer) are
checked too (`test_programs.py`).
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers, ops


def _rng():
    keras.utils.set_random_seed(0)
    return np.random.default_rng(0)


# -- knowledge distillation -------------------------------------------------------------------
class Distiller(keras.Model):
    """keras-io's `Distiller`, as written there (compute_loss calls the teacher)."""

    def __init__(self, student, teacher):
        super().__init__()
        self.teacher = teacher
        self.student = student

    def compile(self, optimizer, metrics, student_loss_fn, distillation_loss_fn, alpha=0.1,
                temperature=3):
        super().compile(optimizer=optimizer, metrics=metrics)
        self.student_loss_fn = student_loss_fn
        self.distillation_loss_fn = distillation_loss_fn
        self.alpha = alpha
        self.temperature = temperature

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, allow_empty=False):
        teacher_pred = self.teacher(x, training=False)
        student_loss = self.student_loss_fn(y, y_pred)
        distillation_loss = self.distillation_loss_fn(
            ops.softmax(teacher_pred / self.temperature, axis=1),
            ops.softmax(y_pred / self.temperature, axis=1),
        ) * (self.temperature ** 2)
        return self.alpha * student_loss + (1 - self.alpha) * distillation_loss

    def call(self, x):
        return self.student(x)


def distiller(frozen: bool):
    rng = _rng()
    x = rng.normal(size=(64, 8)).astype("float32")
    y = rng.integers(0, 4, size=(64,))
    teacher = keras.Sequential([keras.Input((8,)), layers.Dense(16, activation="relu"),
                                layers.Dense(4)], name="teacher")
    student = keras.Sequential([keras.Input((8,)), layers.Dense(4)], name="student")
    teacher.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    teacher.fit(x, y, epochs=1, verbose=0)
    if frozen:
        teacher.trainable = False
    model = Distiller(student=student, teacher=teacher)
    model.compile(optimizer=keras.optimizers.Adam(), metrics=[keras.metrics.SparseCategoricalAccuracy()],
                  student_loss_fn=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  distillation_loss_fn=keras.losses.KLDivergence(), alpha=0.1, temperature=10)
    return model, x, y


# -- collaborative filtering -----------------------------------------------------------------------
class RecommenderNet(keras.Model):
    """keras-io's `RecommenderNet`; `rowwise=False` is the example's `ops.tensordot(u, m, 2)`."""

    def __init__(self, num_users, num_movies, embedding_size, rowwise=False, **kwargs):
        super().__init__(**kwargs)
        self.rowwise = rowwise
        self.user_embedding = layers.Embedding(num_users, embedding_size,
                                               embeddings_initializer="he_normal",
                                               embeddings_regularizer=keras.regularizers.l2(1e-6))
        self.user_bias = layers.Embedding(num_users, 1)
        self.movie_embedding = layers.Embedding(num_movies, embedding_size,
                                                embeddings_initializer="he_normal",
                                                embeddings_regularizer=keras.regularizers.l2(1e-6))
        self.movie_bias = layers.Embedding(num_movies, 1)

    def call(self, inputs):
        user_vector = self.user_embedding(inputs[:, 0])
        user_bias = self.user_bias(inputs[:, 0])
        movie_vector = self.movie_embedding(inputs[:, 1])
        movie_bias = self.movie_bias(inputs[:, 1])
        if self.rowwise:
            dot_user_movie = ops.sum(user_vector * movie_vector, axis=1, keepdims=True)
        else:
            dot_user_movie = ops.tensordot(user_vector, movie_vector, 2)
        x = dot_user_movie + user_bias + movie_bias
        return ops.nn.sigmoid(x)


def recommender(rowwise: bool):
    rng = _rng()
    x = np.stack([rng.integers(0, 20, 128), rng.integers(0, 30, 128)], axis=1)
    y = rng.uniform(size=(128, 1)).astype("float32")
    model = RecommenderNet(20, 30, 8, rowwise=rowwise, name="recommender_net")
    model.compile(loss=keras.losses.BinaryCrossentropy(),
                  optimizer=keras.optimizers.Adam(learning_rate=1e-3))
    return model, x, y


# -- siamese network with a triplet loss ---------------------------------------------------------------
class DistanceLayer(layers.Layer):
    def call(self, anchor, positive, negative):
        ap_distance = ops.sum(ops.square(anchor - positive), -1)
        an_distance = ops.sum(ops.square(anchor - negative), -1)
        return (ap_distance, an_distance)


class SiameseModel(keras.Model):
    """keras-io's `SiameseModel`: its own `train_step`, a triplet loss with a margin."""

    def __init__(self, siamese_network, margin=0.5):
        super().__init__()
        self.siamese_network = siamese_network
        self.margin = margin
        self.loss_tracker = keras.metrics.Mean(name="loss")

    def call(self, inputs):
        return self.siamese_network(inputs)

    def train_step(self, data):
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = self._triplet_loss(data)
        gradients = tape.gradient(loss, self.siamese_network.trainable_weights)
        self.optimizer.apply_gradients(zip(gradients, self.siamese_network.trainable_weights))
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}

    def _triplet_loss(self, data):
        ap_distance, an_distance = self.siamese_network(data)
        return ops.maximum(ap_distance - an_distance + self.margin, 0.0)

    @property
    def metrics(self):
        return [self.loss_tracker]


def siamese(dead: bool):
    rng = _rng()
    inputs = layers.Input((12,))
    hidden = layers.Dense(16, activation="relu",
                          bias_initializer=keras.initializers.Constant(-20.0 if dead else 0.0))(inputs)
    output = layers.Dense(8)(hidden)
    embedding = keras.Model(inputs, output, name="Embedding")
    anchor, positive, negative = (layers.Input(name=n, shape=(12,)) for n in ("anchor", "positive", "negative"))
    distances = DistanceLayer()(embedding(anchor), embedding(positive), embedding(negative))
    network = keras.Model(inputs=[anchor, positive, negative], outputs=distances)
    model = SiameseModel(network)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    base = rng.normal(size=(64, 12)).astype("float32")
    x = [base, base + 0.1 * rng.normal(size=base.shape).astype("float32"),
         rng.normal(size=base.shape).astype("float32")]
    return model, x, None


# -- training mode hard-coded ------------------------------------------------------------------------
class Classifier(keras.Model):
    def __init__(self, layer: str, hardcoded: bool):
        super().__init__(name="classifier")
        self.hidden = layers.Dense(16, activation="relu")
        self.middle = layers.Dropout(0.5) if layer == "dropout" else layers.BatchNormalization()
        self.out = layers.Dense(3, activation="softmax")
        self.hardcoded = hardcoded

    def call(self, x, training=False):
        return self.out(self.middle(self.hidden(x), training=True if self.hardcoded else training))


def hardcoded_training(layer: str, hardcoded: bool):
    rng = _rng()
    x = rng.normal(size=(64, 6)).astype("float32")
    y = rng.integers(0, 3, size=(64,))
    model = Classifier(layer, hardcoded)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model, x, y


# -- a loss that ignores the labels ----------------------------------------------------------------------
def label_free_loss(ignores: bool):
    rng = _rng()
    x = rng.normal(size=(64, 5)).astype("float32")
    y = (x @ rng.normal(size=(5, 1))).astype("float32")

    def centred_mse(y_true, y_pred):  # meant: mean((y_true - y_pred)^2) around the batch mean
        target = y_pred if ignores else y_true
        return ops.mean(ops.square(target - y_pred - ops.mean(target - y_pred)) + 0.01 * ops.square(y_pred))

    model = keras.Sequential([keras.Input((5,)), layers.Dense(8, activation="relu"), layers.Dense(1)])
    model.compile(optimizer="adam", loss=centred_mse)
    return model, x, y


# -- a branch no gradient reaches --------------------------------------------------------------------------
def rounded_branch(rounded: bool):
    rng = _rng()
    x = rng.normal(size=(64, 6)).astype("float32")
    y = rng.integers(0, 2, size=(64, 1)).astype("float32")
    inputs = keras.Input((6,))
    wide = layers.Dense(4, name="wide")(inputs)
    gate = layers.Dense(4, activation="sigmoid", name="gate")(inputs)
    if rounded:  # a 0/1 gate meant as a hard mask: ops.round has no gradient
        gate = layers.Lambda(lambda g: ops.round(g), name="hard_gate")(gate)
    merged = layers.Multiply()([wide, gate])
    outputs = layers.Dense(1, activation="sigmoid", name="head")(merged)
    model = keras.Model(inputs, outputs, name="gated")
    model.compile(optimizer="adam", loss="binary_crossentropy")
    return model, x, y


# -- healthy functional CNN with BatchNormalization and Dropout -----------------------------------------------
def healthy_cnn():
    rng = _rng()
    x = rng.uniform(size=(64, 8, 8, 1)).astype("float32")
    y = rng.integers(0, 3, size=(64,))
    inputs = keras.Input((8, 8, 1))
    h = layers.Conv2D(4, 3, activation="relu")(inputs)
    h = layers.BatchNormalization()(h)
    h = layers.GlobalAveragePooling2D()(h)
    h = layers.Dropout(0.3)(h)
    outputs = layers.Dense(3, activation="softmax")(h)
    model = keras.Model(inputs, outputs, name="cnn")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model, x, y


# -- a metric that ignores the labels ---------------------------------------------------------------
def label_free_metric(ignores: bool):
    """A hand-written accuracy with a typo: it compares the predictions with themselves."""
    rng = _rng()
    x = rng.normal(size=(64, 5)).astype("float32")
    y = rng.integers(0, 3, size=(64,))

    def top1(y_true, y_pred):
        truth = ops.argmax(y_pred, axis=-1) if ignores else ops.cast(y_true, "int64")
        return ops.mean(ops.cast(ops.equal(ops.argmax(y_pred, axis=-1), ops.reshape(truth, (-1,))),
                                 "float32"))

    model = keras.Sequential([keras.Input((5,)), layers.Dense(8, activation="relu"),
                              layers.Dense(3, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=[top1, "accuracy"])
    return model, x, y
