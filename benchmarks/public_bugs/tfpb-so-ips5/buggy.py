"""Simple linear regression on 8 points (Stack Overflow question 39939881), buggy version.

Ported from TensorFlow-Program-Bugs StackOverflow/IPS-5/39939881-buggy/simple_regression.py.
"""
import random

import keras
import numpy as np
from keras import layers, ops

keras.utils.set_random_seed(20180130)
np.random.seed(20180130)
random.seed(20180130)

_w = random.uniform(-8, 8)
_b = random.uniform(-8, 8)
print(_w, _b)
size = 8
X = [random.uniform(-8, 8) for _ in range(size)]
Y = [_w * x + _b + random.uniform(-1, 1) for x in X]

# PORT: y_ = x * W + B with W, B zeros as one Dense unit with zero initializers.
model = keras.Sequential([keras.Input(shape=(1,)), layers.Dense(1, kernel_initializer="zeros", bias_initializer="zeros")])


def loss(y, y_):
    return ops.mean(ops.square(y_ - y))


model.compile(optimizer=keras.optimizers.SGD(1e-1), loss=loss)
# PORT: 100 full-batch sess.run(optimizer) steps -> fit with batch_size=8 for 100 epochs.
history = model.fit(np.array(X, "float32").reshape(-1, 1), np.array(Y, "float32").reshape(-1, 1),
                    batch_size=size, epochs=100, shuffle=False, verbose=0)
print("loss", history.history["loss"][-1], "w, b", [float(v.numpy().ravel()[0]) for v in model.weights])
