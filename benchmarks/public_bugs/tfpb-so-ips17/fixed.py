"""Quadratic fit A x^2 + B x + C (Stack Overflow question 46577203), fixed version.

Ported from TensorFlow-Program-Bugs StackOverflow/IPS-17/46577203-fix/linear_regression.py.
"""
import keras
import numpy as np
from keras import layers, ops

keras.utils.set_random_seed(20180130)


# PORT: the three tf.Variable parameters A, B, C (zeros) and the expression A*x**2 + B*x + C
# became one small Keras layer.
class Quadratic(layers.Layer):
    def build(self, input_shape):
        self.A = self.add_weight(shape=(1,), initializer="zeros", name="A")
        self.B = self.add_weight(shape=(1,), initializer="zeros", name="B")
        self.C = self.add_weight(shape=(1,), initializer="zeros", name="C")

    def call(self, x):
        return self.A * (x ** 2) + self.B * x + self.C


model = keras.Sequential([keras.Input(shape=(1,)), Quadratic()])


def loss(y, model_output):
    return ops.sum(ops.square(model_output - y))  # sum of the squares


# optimizer
optimizer = keras.optimizers.SGD(0.001)
model.compile(optimizer=optimizer, loss=loss)
# training data
x_train = np.array([0, 1, 2, 3], dtype="float32").reshape(-1, 1)
y_train = np.array([0, 1, 4, 9], dtype="float32").reshape(-1, 1)
# training loop
# PORT: 100 full-batch sess.run(train) steps -> fit with batch_size=4 for 100 epochs.
history = model.fit(x_train, y_train, batch_size=4, epochs=100, shuffle=False, verbose=0)
print("A, B, C", [float(v.numpy()[0]) for v in model.weights], "loss", history.history["loss"][-1])
