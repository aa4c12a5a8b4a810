"""Variational autoencoder on MNIST from tensorflow/models (autoencoder/), buggy version.

Ported from defects4ml bugs/006/buggy (autoencoder/VariationalAutoencoderRunner.py,
autoencoder/autoencoder_models/VariationalAutoencoder.py, autoencoder/Utils.py).
"""
import keras
import numpy as np
import sklearn.preprocessing as prep
from keras import ops
from sklearn.datasets import load_digits

keras.utils.set_random_seed(6)  # PORT: the original sets no seed


def xavier_init(fan_in, fan_out, constant=1):
    low = -constant * np.sqrt(6.0 / (fan_in + fan_out))
    high = constant * np.sqrt(6.0 / (fan_in + fan_out))
    return keras.initializers.RandomUniform(minval=low, maxval=high)


# PORT: the TF1 class (placeholders, variables, a session) -> a Keras layer holding the same
# variables; the latent loss is added with add_loss, the reconstruction loss is the compiled loss.
class VariationalAutoencoder(keras.layers.Layer):

    def __init__(self, n_input, n_hidden, gaussian_sample_size=128):
        super().__init__()
        self.n_input = n_input
        self.n_hidden = n_hidden
        self.gaussian_sample_size = gaussian_sample_size
        self.w1 = self.add_weight(shape=(n_input, n_hidden), initializer=xavier_init(n_input, n_hidden), name="w1")
        self.log_sigma_w1 = self.add_weight(shape=(n_input, n_hidden), initializer=xavier_init(n_input, n_hidden),
                                            name="log_sigma_w1")
        self.b1 = self.add_weight(shape=(n_hidden,), initializer="zeros", name="b1")
        self.log_sigma_b1 = self.add_weight(shape=(n_hidden,), initializer="zeros", name="log_sigma_b1")
        self.w2 = self.add_weight(shape=(n_hidden, n_input), initializer="zeros", name="w2")
        self.b2 = self.add_weight(shape=(n_input,), initializer="zeros", name="b2")
        self.seed = keras.random.SeedGenerator(6)

    def call(self, x):
        z_mean = ops.add(ops.matmul(x, self.w1), self.b1)
        z_log_sigma_sq = ops.add(ops.matmul(x, self.log_sigma_w1), self.log_sigma_b1)
        # sample from gaussian distribution
        eps = keras.random.normal((self.gaussian_sample_size, self.n_hidden), 0, 1, dtype="float32", seed=self.seed)
        z = ops.add(z_mean, ops.multiply(ops.sqrt(ops.exp(z_log_sigma_sq)), eps))
        reconstruction = ops.add(ops.matmul(z, self.w2), self.b2)
        latent_loss = -0.5 * ops.sum(1 + z_log_sigma_sq - ops.square(z_mean) - ops.exp(z_log_sigma_sq), 1)
        self.add_loss(ops.mean(latent_loss))
        return reconstruction


def reconstr_loss(x, reconstruction):
    return 0.5 * ops.sum(ops.power(ops.subtract(reconstruction, x), 2.0))


# PORT: input_data.read_data_sets('MNIST_data') -> sklearn's 8x8 digits, each pixel repeated 3x3 and
# padded to 28x28, flattened to 784 values in [0, 1] (as mnist.train.images); the last 297 as test.
digits = load_digits()
images = np.pad(np.kron(digits.images / 16.0, np.ones((3, 3))), ((0, 0), (2, 2), (2, 2))).reshape(-1, 784)
train_images, test_images = images[:1500].astype("float32"), images[1500:].astype("float32")


def standard_scale(X_train, X_test):
    preprocessor = prep.StandardScaler().fit(X_train)
    X_train = preprocessor.transform(X_train)
    X_test = preprocessor.transform(X_test)
    return X_train, X_test


X_train, X_test = standard_scale(train_images, test_images)

training_epochs = 20
batch_size = 128

inputs = keras.Input(shape=(784,))
autoencoder = keras.Model(inputs, VariationalAutoencoder(n_input=784, n_hidden=200, gaussian_sample_size=128)(inputs))
autoencoder.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss=reconstr_loss)
# PORT: each epoch's int(n_samples / batch_size) calls of partial_fit on get_random_block_from_data
# (a random contiguous block of 128 rows) -> fit on 1,408 rows (11 full batches of 128) in shuffled order.
history = autoencoder.fit(X_train[:1408], X_train[:1408], batch_size=batch_size, epochs=training_epochs, verbose=0)
print("cost", [round(c, 1) for c in history.history["loss"][::4]])
