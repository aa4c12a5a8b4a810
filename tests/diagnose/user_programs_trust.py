"""More user-shaped programs (issue 22): the shapes diagnosis got wrong, each with a healthy twin.

Healthy: token ids into a custom `TokenAndPositionEmbedding`-style wrapper
(keras-io), a wrapper nested two deep in a subclassed model, ids read through
`tf.one_hot`, a VAE with a 2-dimensional latent and a wide ReLU decoder, an
iris-sized sigmoid MLP with categorical cross-entropy, a small-data binary
classifier, BatchNormalization in a convnet and in a tabular MLP, a 2048-unit
ReLU layer, a WGAN-GP (several critic steps, a gradient penalty from a nested
tape). Buggy, one fault each: a far too wide initializer (MLP, convnet and a
deep ReLU stack that goes NaN), a wrong loss for the task (a regression loss
on a classifier's probabilities, a binary loss on a multi-class head, a
softmax on a regression target), SGD with momentum at batch size 1, raw
pixels into a convnet, a layer made dead by its bias, a VAE whose optimizer
barely moves, raw pixels into a wrapper around `Dense` (the twin of the
embedding wrapper: a wrapper does not excuse a raw float input).

`item` is the issue-22 item a program shows (1-7, or "root" for the root-cause
cases); `run` is `user_programs.run`.
"""

from __future__ import annotations

from .user_programs import UserProgram

_TOKEN_AND_POSITION = """
class TokenAndPositionEmbedding(keras.layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.token_emb = keras.layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = keras.layers.Embedding(input_dim=maxlen, output_dim=embed_dim)
    def call(self, x):
        positions = keras.ops.arange(0, keras.ops.shape(x)[-1], 1)
        return self.token_emb(x) + self.pos_emb(positions)
rng = np.random.default_rng(0)
tokens = rng.integers(1, 400, size=(1000, 24))
labels = (tokens[:, :6].mean(1) > 200).astype("int64")
"""

_VAE = """
class Sampling(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed = keras.random.SeedGenerator(1337)
    def call(self, inputs):
        z_mean, z_log_var = inputs
        eps = keras.random.normal(keras.ops.shape(z_mean), seed=self.seed)
        return z_mean + keras.ops.exp(0.5 * z_log_var) * eps
latent_dim = 2
enc_in = keras.Input((64,))
h = keras.layers.Dense(64, activation="relu")(enc_in)
z_mean = keras.layers.Dense(latent_dim, name="z_mean")(h)
z_log_var = keras.layers.Dense(latent_dim, name="z_log_var")(h)
encoder = keras.Model(enc_in, [z_mean, z_log_var, Sampling()([z_mean, z_log_var])], name="encoder")
dec_in = keras.Input((latent_dim,))
h = keras.layers.Dense(1536, activation="relu")(dec_in)
decoder = keras.Model(dec_in, keras.layers.Dense(64, activation="sigmoid")(h), name="decoder")
class VAE(keras.Model):
    def __init__(self, encoder, decoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder, self.decoder = encoder, decoder
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
            reconstruction_loss = keras.ops.mean(keras.ops.sum(
                keras.losses.binary_crossentropy(data[..., None], reconstruction[..., None]), axis=1))
            kl_loss = -0.5 * (1 + z_log_var - keras.ops.square(z_mean) - keras.ops.exp(z_log_var))
            kl_loss = keras.ops.mean(keras.ops.sum(kl_loss, axis=1))
            total_loss = reconstruction_loss + kl_loss
        grads = tape.gradient(total_loss, self.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
        self.total_loss_tracker.update_state(total_loss)
        self.reconstruction_loss_tracker.update_state(reconstruction_loss)
        self.kl_loss_tracker.update_state(kl_loss)
        return {m.name: m.result() for m in self.metrics}
vae = VAE(encoder, decoder)
"""

HEALTHY = [
    UserProgram("token_position_embedding_wrapper", None, _TOKEN_AND_POSITION + """
inputs = keras.Input((24,), dtype="int32")
h = TokenAndPositionEmbedding(24, 400, 16)(inputs)
h = keras.layers.GlobalAveragePooling1D()(h)
h = keras.layers.Dense(16, activation="relu")(h)
model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(h))
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(tokens, labels, epochs=6, batch_size=32, validation_split=0.2, verbose=0)
"""),
    UserProgram("nested_embedding_wrapper_subclassed", None, _TOKEN_AND_POSITION + """
class Encoder(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embed = TokenAndPositionEmbedding(24, 400, 16)
        self.pool = keras.layers.GlobalAveragePooling1D()
    def call(self, x):
        return self.pool(self.embed(x))
class Classifier(keras.Model):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.hidden = keras.layers.Dense(16, activation="relu")
        self.out = keras.layers.Dense(2, activation="softmax")
    def call(self, x):
        return self.out(self.hidden(self.encoder(x)))
model = Classifier()
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(tokens.astype("float32"), labels, epochs=6, batch_size=32, validation_split=0.2, verbose=0)
"""),
    UserProgram("one_hot_ids_layer", None, """
class OneHotDense(keras.layers.Layer):
    def __init__(self, depth, units, **kwargs):
        super().__init__(**kwargs)
        self.depth = depth
        self.dense = keras.layers.Dense(units, activation="relu")
    def call(self, ids):
        return self.dense(keras.ops.sum(keras.ops.one_hot(keras.ops.cast(ids, "int32"), self.depth), axis=1))
rng = np.random.default_rng(0)
ids = rng.integers(0, 120, size=(1000, 5))
labels = (ids.max(1) > 100).astype("int64")
inputs = keras.Input((5,), dtype="int64")
model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(OneHotDense(120, 32)(inputs)))
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(ids, labels, epochs=6, batch_size=32, validation_split=0.2, verbose=0)
"""),
    UserProgram("vae_narrow_latent_wide_relu", None, _VAE + """
vae.compile(optimizer=keras.optimizers.Adam())
vae.fit(digits_x / 16.0, epochs=8, batch_size=64, verbose=0)
"""),
    UserProgram("iris_sigmoid_categorical", None, """
x, y = load_iris(return_X_y=True)
order = np.random.default_rng(0).permutation(len(x))
x = ((x - x.mean(0)) / x.std(0)).astype("float32")[order]
y = keras.utils.to_categorical(y[order], 3)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(10, activation="sigmoid"),
                          keras.layers.Dense(3, activation="softmax")])
model.compile(optimizer=keras.optimizers.Adam(0.01), loss="categorical_crossentropy",
              metrics=["accuracy"])
model.fit(x, y, epochs=60, batch_size=8, validation_split=0.2, verbose=0)
"""),
    UserProgram("small_data_binary_classifier", None, """
x, y = load_breast_cancer(return_X_y=True)
x = ((x - x.mean(0)) / x.std(0)).astype("float32")[:150]
y = y.astype("float32")[:150]
model = keras.Sequential([keras.Input((30,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
model.fit(x, y, epochs=25, batch_size=16, validation_split=0.2, verbose=0)
"""),
    UserProgram("batchnorm_cnn", None, """
images = (digits_x / 16.0).reshape(-1, 8, 8, 1)
model = keras.Sequential([keras.Input((8, 8, 1)),
                          keras.layers.Conv2D(16, 3, padding="same", use_bias=False),
                          keras.layers.BatchNormalization(), keras.layers.Activation("relu"),
                          keras.layers.MaxPooling2D(), keras.layers.Conv2D(32, 3, padding="same"),
                          keras.layers.BatchNormalization(), keras.layers.ReLU(),
                          keras.layers.GlobalAveragePooling2D(),
                          keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(images, digits_y, epochs=5, batch_size=32, validation_split=0.2, verbose=0)
"""),
    UserProgram("batchnorm_tabular_mlp", None, """
from sklearn.datasets import load_wine
x, y = load_wine(return_X_y=True)
order = np.random.default_rng(0).permutation(len(x))
x, y = x[order].astype("float32"), y[order]
model = keras.Sequential([keras.Input((13,)), keras.layers.BatchNormalization(),
                          keras.layers.Dense(32), keras.layers.BatchNormalization(),
                          keras.layers.Activation("relu"),
                          keras.layers.Dense(3, activation="softmax")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, epochs=30, batch_size=16, validation_split=0.2, verbose=0)
"""),
    UserProgram("wide_relu_mlp", None, """
model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16),
                          keras.layers.Dense(2048, activation="relu"),
                          keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(digits_x, digits_y, epochs=5, batch_size=64, validation_split=0.2, verbose=0)
"""),
    UserProgram("wgan_gp", None, """
class WGANGP(keras.Model):
    def __init__(self):
        super().__init__()
        self.critic = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64),
                                        keras.layers.LeakyReLU(0.2), keras.layers.Dense(1)], name="critic")
        self.generator = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64),
                                           keras.layers.LeakyReLU(0.2),
                                           keras.layers.Dense(64, activation="sigmoid")], name="generator")
        self.seed = keras.random.SeedGenerator(3)
        self.d_steps, self.gp_weight = 3, 10.0
    def compile(self, d_optimizer, g_optimizer):
        super().compile()
        self.d_optimizer, self.g_optimizer = d_optimizer, g_optimizer
    def gradient_penalty(self, real, fake):
        alpha = keras.random.uniform((tf.shape(real)[0], 1), seed=self.seed)
        mixed = real + alpha * (fake - real)
        with tf.GradientTape() as gp_tape:
            gp_tape.watch(mixed)
            pred = self.critic(mixed, training=True)
        grads = gp_tape.gradient(pred, [mixed])[0]
        norm = tf.sqrt(tf.reduce_sum(tf.square(grads), axis=1))
        return tf.reduce_mean((norm - 1.0) ** 2)
    def train_step(self, real):
        n = tf.shape(real)[0]
        for _ in range(self.d_steps):
            z = keras.random.normal((n, 16), seed=self.seed)
            with tf.GradientTape() as tape:
                fake = self.generator(z, training=True)
                d_cost = tf.reduce_mean(self.critic(fake, training=True)) - tf.reduce_mean(
                    self.critic(real, training=True))
                d_loss = d_cost + self.gp_weight * self.gradient_penalty(real, fake)
            grads = tape.gradient(d_loss, self.critic.trainable_variables)
            self.d_optimizer.apply_gradients(zip(grads, self.critic.trainable_variables))
        z = keras.random.normal((n, 16), seed=self.seed)
        with tf.GradientTape() as tape:
            g_loss = -tf.reduce_mean(self.critic(self.generator(z, training=True), training=True))
        grads = tape.gradient(g_loss, self.generator.trainable_variables)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_variables))
        return {"d_loss": d_loss, "g_loss": g_loss}
gan = WGANGP()
gan.compile(keras.optimizers.Adam(2e-4, beta_1=0.5, beta_2=0.9),
            keras.optimizers.Adam(2e-4, beta_1=0.5, beta_2=0.9))
gan.fit((digits_x / 16.0).astype("float32"), epochs=4, batch_size=64, verbose=0)
"""),
]

BUGGY = [
    UserProgram("raw_pixels_into_dense_wrapper", "unnormalized_input", """
class Block(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(64, activation="relu")
    def call(self, x):
        return self.dense(x)
inputs = keras.Input((64,))
model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(Block()(inputs)))
model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy")
model.fit(digits_x * 16, digits_y, epochs=4, batch_size=32, verbose=0)
""", also=("nonfinite", "learning_rate", "dead_relu", "no_learning", "exploding_gradient", "collapsed_output")),
    UserProgram("initializer_far_too_wide_mlp", "saturated_activation", """
x, y = load_breast_cancer(return_X_y=True)
order = np.random.default_rng(0).permutation(len(x))
x = ((x - x.mean(0)) / x.std(0)).astype("float32")[order]
y = y.astype("float32")[order]
init = keras.initializers.RandomNormal(stddev=8.0)
model = keras.Sequential([keras.Input((30,)),
                          keras.layers.Dense(64, activation="tanh", kernel_initializer=init),
                          keras.layers.Dense(64, activation="tanh", kernel_initializer=init),
                          keras.layers.Dense(1, activation="sigmoid", kernel_initializer=init)])
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
model.fit(x, y, epochs=10, batch_size=32, validation_split=0.2, verbose=0)
""", also=("exploding_gradient", "vanishing_gradient", "oscillating_loss", "no_learning",
           "slow_convergence", "learning_rate")),
    UserProgram("initializer_far_too_wide_cnn", "exploding_gradient", """
images = (digits_x / 16.0).reshape(-1, 8, 8, 1)
init = keras.initializers.RandomNormal(stddev=3.0)
model = keras.Sequential([keras.Input((8, 8, 1)),
                          keras.layers.Conv2D(16, 3, activation="relu", kernel_initializer=init),
                          keras.layers.Conv2D(32, 3, activation="relu", kernel_initializer=init),
                          keras.layers.Flatten(),
                          keras.layers.Dense(10, activation="softmax", kernel_initializer=init)])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(images, digits_y, epochs=5, batch_size=32, validation_split=0.2, verbose=0)
""", also=("saturated_activation", "dead_relu", "oscillating_loss", "no_learning",
           "slow_convergence", "nonfinite", "learning_rate", "vanishing_gradient")),
    UserProgram("deep_relu_init_goes_nan", "exploding_gradient", """
init = keras.initializers.RandomNormal(stddev=0.4)
model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16)]
                         + [keras.layers.Dense(64, activation="relu", kernel_initializer=init)
                            for _ in range(8)]
                         + [keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")
model.fit(digits_x, digits_y, epochs=3, batch_size=32, verbose=0)
""", also=("nonfinite", "dead_relu", "no_learning", "learning_rate", "oscillating_loss")),
    UserProgram("mse_on_softmax_classifier", "loss_activation_mismatch", """
model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16),
                          keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer="adam", loss="mse", metrics=["accuracy"])
model.fit(digits_x, digits_y.reshape(-1, 1), epochs=5, batch_size=32, validation_split=0.2, verbose=0)
""", also=("no_learning", "label_range", "slow_convergence", "dead_relu")),
    UserProgram("binary_loss_multiclass_head", "loss_activation_mismatch", """
model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16),
                          keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
model.fit(digits_x, keras.utils.to_categorical(digits_y, 10), epochs=5, batch_size=32, validation_split=0.2, verbose=0)
""", also=("no_learning", "label_range", "slow_convergence", "nonfinite", "dead_relu")),
    UserProgram("softmax_on_regression_target", "loss_activation_mismatch", """
x, y = load_diabetes(return_X_y=True)
x = ((x - x.mean(0)) / x.std(0)).astype("float32")
y = ((y - y.mean()) / y.std()).astype("float32")
model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(1, activation="softmax")])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, epochs=8, batch_size=32, validation_split=0.2, verbose=0)
""", also=("no_learning", "label_range", "slow_convergence", "collapsed_output")),
    UserProgram("sgd_momentum_batch_size_one", "learning_rate", """
x, y = load_iris(return_X_y=True)
order = np.random.default_rng(0).permutation(len(x))
x = ((x - x.mean(0)) / x.std(0)).astype("float32")[order]
y = y[order]
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(3, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, epochs=5, batch_size=1, validation_split=0.2, verbose=0)
""", also=("oscillating_loss", "dead_relu", "no_learning", "nonfinite", "exploding_gradient",
           "vanishing_gradient")),
    UserProgram("raw_pixels_cnn", "unnormalized_input", """
images = (digits_x * 16).reshape(-1, 8, 8, 1)
model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(16, 3, activation="relu"),
                          keras.layers.Flatten(), keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy")
model.fit(images, digits_y, epochs=4, batch_size=32, verbose=0)
""", also=("nonfinite", "learning_rate", "dead_relu", "no_learning", "exploding_gradient",
           "oscillating_loss")),
    UserProgram("raw_pixels_subclassed_cnn", "unnormalized_input", """
class Net(keras.Model):
    def __init__(self):
        super().__init__()
        self.conv = keras.layers.Conv2D(16, 3, activation="relu")
        self.flat = keras.layers.Flatten()
        self.out = keras.layers.Dense(10, activation="softmax")
    def call(self, x):
        return self.out(self.flat(self.conv(x)))
model = Net()
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit((digits_x * 16).reshape(-1, 8, 8, 1), digits_y, epochs=4, batch_size=32, verbose=0)
""", also=("nonfinite", "learning_rate", "dead_relu", "no_learning", "exploding_gradient",
           "oscillating_loss", "slow_convergence")),
    UserProgram("relu_layer_dead_by_bias", "dead_relu", """
model = keras.Sequential([keras.Input((64,)), keras.layers.Rescaling(1 / 16),
                          keras.layers.Dense(512, activation="relu",
                                             bias_initializer=keras.initializers.Constant(-20.0)),
                          keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(digits_x, digits_y, epochs=5, batch_size=64, validation_split=0.2, verbose=0)
""", also=("no_learning", "slow_convergence", "vanishing_gradient", "untrained_variable", "collapsed_output")),
    UserProgram("vae_optimizer_barely_moves", "learning_rate", _VAE + """
vae.compile(optimizer=keras.optimizers.SGD(1e-8))
vae.fit(digits_x / 16.0, epochs=5, batch_size=64, verbose=0)
""", also=("no_learning", "slow_convergence")),
]

ITEMS = {
    "token_position_embedding_wrapper": "1", "nested_embedding_wrapper_subclassed": "1",
    "one_hot_ids_layer": "1", "raw_pixels_into_dense_wrapper": "1",
    "vae_narrow_latent_wide_relu": "2", "wide_relu_mlp": "2", "relu_layer_dead_by_bias": "2",
    "iris_sigmoid_categorical": "3", "small_data_binary_classifier": "3",
    "initializer_far_too_wide_mlp": "4", "initializer_far_too_wide_cnn": "4",
    "mse_on_softmax_classifier": "5", "binary_loss_multiclass_head": "5",
    "deep_relu_init_goes_nan": "6",
    "wgan_gp": "7", "vae_optimizer_barely_moves": "7",
    "sgd_momentum_batch_size_one": "root", "softmax_on_regression_target": "root",
    "raw_pixels_cnn": "root", "raw_pixels_subclassed_cnn": "root", "batchnorm_cnn": "healthy", "batchnorm_tabular_mlp": "healthy",
}

__all__ = ["BUGGY", "HEALTHY", "ITEMS"]
