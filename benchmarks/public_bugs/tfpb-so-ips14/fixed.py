"""A very simple MNIST classifier (Stack Overflow question 33641799), fixed version.

Ported from TensorFlow-Program-Bugs StackOverflow/IPS-14/33641799-fix/mnist.py.
"""
import keras
import numpy as np
from keras import layers, ops
from sklearn.datasets import load_digits

keras.utils.set_random_seed(20180130)

# PORT: MNIST download -> sklearn's 8x8 digits, each pixel repeated 3x3 and padded to 28x28 (784
# features), scaled so that the mean squared norm of an image is MNIST's (88); one-hot labels.
digits = load_digits()
x_train = np.pad(np.kron(digits.images / 16.0, np.ones((3, 3))), ((0, 0), (2, 2), (2, 2))).reshape(-1, 784)
x_train = (x_train * np.sqrt(88.0 / (x_train ** 2).sum(axis=1).mean())).astype("float32")
y_train = keras.utils.to_categorical(digits.target, 10)

# PORT: y = softmax(x W + b) with W, b zeros became one Dense layer with zero initializers.
model = keras.Sequential([
    keras.Input(shape=(784,)),
    layers.Dense(10, activation="softmax", kernel_initializer="zeros", bias_initializer="zeros"),
])


def cross_entropy(y_, y):
    return -ops.sum(y_ * ops.log(y))


model.compile(optimizer=keras.optimizers.SGD(0.005), loss=cross_entropy, metrics=["accuracy"])
# PORT: 1000 steps of mnist.train.next_batch(205) -> 1797 digits in batches of 205 for 100 epochs (900 steps).
history = model.fit(x_train, y_train, batch_size=205, epochs=100, verbose=0)
print("loss", history.history["loss"][-1], "accuracy", history.history["accuracy"][-1])
