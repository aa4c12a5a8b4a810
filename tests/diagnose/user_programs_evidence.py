"""User-shaped programs of issue 41 (items 3-5) and issue 46 (items 7-8): evidence that can tell.

Healthy: an embedding classifier whose accuracy climbs from 0.52 to 0.68
while its loss barely moves (it learns; issue 46 said `no_learning`),
augmentation layers before a `Rescaling` (the transfer-learning guide's
shape), token ids into `Embedding`s beside a float input feeding a
`Concatenate` (the functional API guide's multi-input model), a first
batch whose sample weights are all zero. Buggy, one fault each: a deep
sigmoid stack stuck at chance (its vanishing gradients are the cause, not a
remark), a `LayerNormalization` over a single feature that throws away every
attention and Conv1D weight before it (the keras-io timeseries
transformer's shape), a custom `train_step` that applies its own optimizer
at a rate far too high beside `compile()`'s default, labels 0/1/2 under
binary cross-entropy, ReLUs dead from the start under a sigmoid output
(which sits near 0.5: the loss reads the labels, whatever it scores there).

`ITEMS` maps each program to the issue item it shows; `run` is
`user_programs.run`.
"""

from __future__ import annotations

from .user_programs import UserProgram

HEALTHY = [
    UserProgram("embedding_accuracy_rising", None, """
        rng = np.random.default_rng(0)
        n, length, vocab = 2000, 40, 2000
        tokens = rng.integers(1, vocab, size=(n, length))
        signal = (tokens < 100).sum(1) - (tokens >= vocab - 100).sum(1)
        labels = (signal + rng.normal(0, 1.0, n) > 0).astype("float32")
        model = keras.Sequential([keras.Input((length,), dtype="int32"), keras.layers.Embedding(vocab, 16),
                                  keras.layers.GlobalAveragePooling1D(),
                                  keras.layers.Dense(1, activation="sigmoid")])
        model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="binary_crossentropy", metrics=["accuracy"])
        model.fit(tokens, labels, epochs=4, batch_size=32, validation_split=0.2, verbose=0)
    """),
    UserProgram("augmentation_before_rescaling", None, """
        images = np.repeat((digits_x.reshape(-1, 8, 8, 1) * 16).astype("float32"), 3, axis=-1)  # 0..255
        augment = keras.Sequential([keras.layers.RandomFlip("horizontal"), keras.layers.RandomRotation(0.05)])
        inputs = keras.Input((8, 8, 3))
        h = keras.layers.Rescaling(1 / 127.5, offset=-1)(augment(inputs))
        h = keras.layers.Conv2D(16, 3, activation="relu")(h)
        h = keras.layers.Flatten()(h)
        model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(h))
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(images, digits_y, epochs=5, batch_size=32, validation_split=0.2, verbose=0)
    """),
    UserProgram("token_ids_beside_float_tags", None, """
        rng = np.random.default_rng(0)
        title = keras.Input((None,), name="title")
        body = keras.Input((None,), name="body")
        tags = keras.Input((12,), name="tags")
        h = keras.layers.concatenate([
            keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(1000, 16)(title)),
            keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(1000, 16)(body)), tags])
        model = keras.Model([title, body, tags], {"priority": keras.layers.Dense(1, name="priority")(h),
                                                  "department": keras.layers.Dense(4, name="department")(h)})
        model.compile(optimizer=keras.optimizers.RMSprop(1e-3),
                      loss={"priority": keras.losses.BinaryCrossentropy(from_logits=True),
                            "department": keras.losses.CategoricalCrossentropy(from_logits=True)},
                      loss_weights={"priority": 1.0, "department": 0.2})
        words = rng.integers(1000, size=(1280, 12))
        data = {"title": words, "body": rng.integers(1000, size=(1280, 50)),
                "tags": (words[:, :12] % 2).astype("float32")}
        targets = {"priority": (words[:, :1] % 2).astype("float32"),
                   "department": np.eye(4)[words[:, 1] % 4]}
        model.fit(data, targets, epochs=4, batch_size=32, verbose=0)
    """),
    UserProgram("first_batch_without_weight", None, """
        x, y = load_breast_cancer(return_X_y=True)
        x = ((x - x.mean(0)) / x.std(0)).astype("float32")
        weights = np.ones(len(x), "float32")
        weights[:32] = 0.0  # the first batch carries no weight
        model = keras.Sequential([keras.Input((30,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(1, activation="sigmoid")])
        model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
        model.fit(x, y.astype("float32"), sample_weight=weights, epochs=8, batch_size=32, shuffle=False,
                  verbose=0)
    """),
]

BUGGY = [
    UserProgram("deep_sigmoid_at_chance", "vanishing_gradient", """
        rng = np.random.default_rng(0)
        x = rng.normal(size=(1024, 20)).astype("float32")
        y = (x[:, :5].sum(1) > 0).astype("float32")
        model = keras.Sequential([keras.Input((20,))]
                                 + [keras.layers.Dense(32, activation="sigmoid") for _ in range(10)]
                                 + [keras.layers.Dense(1, activation="sigmoid")])
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="binary_crossentropy", metrics=["accuracy"])
        model.fit(x, y, epochs=6, batch_size=32, verbose=0)
    """, also=("no_learning", "collapsed_output", "slow_convergence")),
    UserProgram("layer_normalization_over_one_feature", "untrained_variable", """
        rng = np.random.default_rng(0)
        x = rng.normal(size=(512, 50, 1)).astype("float32")
        y = (x[:, :10, 0].mean(1) > 0).astype("int64")
        def encoder(inputs):
            h = keras.layers.MultiHeadAttention(key_dim=8, num_heads=2)(inputs, inputs)
            h = keras.layers.LayerNormalization(epsilon=1e-6)(h)  # one feature: outputs its offset
            res = h + inputs
            h = keras.layers.Conv1D(4, 1, activation="relu")(res)
            h = keras.layers.Conv1D(inputs.shape[-1], 1)(h)
            return keras.layers.LayerNormalization(epsilon=1e-6)(h) + res
        inputs = keras.Input((50, 1))
        h = encoder(encoder(inputs))
        h = keras.layers.GlobalAveragePooling1D(data_format="channels_first")(h)
        h = keras.layers.Dense(16, activation="relu")(h)
        model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(h))
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                      metrics=["sparse_categorical_accuracy"])
        model.fit(x, y, validation_split=0.2, epochs=3, batch_size=64, verbose=0)
    """, also=("no_learning", "slow_convergence")),
    UserProgram("own_optimizer_rate_far_too_high", "learning_rate", """
        class Own(keras.Model):
            def __init__(self):
                super().__init__()
                self.body = keras.Sequential([keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
                self.opt = keras.optimizers.Adam(1.0)
                self.ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                self.tracker = keras.metrics.Mean(name="loss")
            def call(self, x):
                return self.body(x)
            @property
            def metrics(self):
                return [self.tracker]
            def train_step(self, data):
                x, y = data
                with tf.GradientTape() as tape:
                    loss = self.ce(y, self(x, training=True))
                grads = tape.gradient(loss, self.trainable_variables)
                self.opt.apply_gradients(zip(grads, self.trainable_variables))
                self.tracker.update_state(loss)
                return {"loss": self.tracker.result()}
        model = Own()
        model.compile()  # the default RMSprop the train_step never uses
        model.fit(digits_x / 16, digits_y, epochs=5, batch_size=32, verbose=0)
    """, also=("collapsed_output", "dead_relu", "no_learning", "nonfinite", "exploding_gradient",
               "oscillating_loss")),
    UserProgram("binary_loss_on_three_classes", "label_range", """
        x, y = load_iris(return_X_y=True)
        x = ((x - x.mean(0)) / x.std(0)).astype("float32")
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(1, activation="sigmoid")])
        model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
        model.fit(x, y, epochs=10, batch_size=16, verbose=0)
    """, also=("loss_activation_mismatch", "no_learning", "nonfinite")),
    UserProgram("dead_relus_under_a_sigmoid", "dead_relu", """
        rng = np.random.default_rng(0)
        x = rng.normal(size=(512, 10)).astype("float32")
        y = (x[:, 0] > 0).astype("int64")
        model = keras.Sequential([keras.Input((10,)),
                                  keras.layers.Dense(32, activation="relu",
                                                     bias_initializer=keras.initializers.Constant(-100.0)),
                                  keras.layers.Dense(1, activation="sigmoid")])
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="binary_crossentropy", metrics=["accuracy"])
        model.fit(x, y, epochs=5, batch_size=32, verbose=0)
    """, also=("no_learning", "untrained_variable", "collapsed_output", "vanishing_gradient")),
]

ITEMS = {
    "embedding_accuracy_rising": "46.8", "first_batch_without_weight": "46.7",
    "augmentation_before_rescaling": "41.3", "token_ids_beside_float_tags": "41.3",
    "layer_normalization_over_one_feature": "41.3", "own_optimizer_rate_far_too_high": "41.3",
    "dead_relus_under_a_sigmoid": "41.3", "binary_loss_on_three_classes": "41.4",
    "deep_sigmoid_at_chance": "41.5",
}

__all__ = ["BUGGY", "HEALTHY", "ITEMS"]
