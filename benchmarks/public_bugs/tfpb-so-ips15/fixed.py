"""Linear regression y = 2x + 4 + noise (Stack Overflow question 43636736), fixed version.

Ported from TensorFlow-Program-Bugs StackOverflow/IPS-15/43636736-fix/linear_regression.py.
"""
import keras
import numpy as np
from keras import layers, ops

keras.utils.set_random_seed(20180130)
np.random.seed(20180130)

T = 100
noise = 10 * np.random.random(size=T).astype(np.float32)
x = np.array([np.arange(T), np.ones(T)]).astype(np.float32)
w = np.array([[2, 4]]).astype(np.float32)
y = w.dot(x) + noise

# PORT: Yhat = W X with W a [1, 2] variable of ones; X is fed as T rows of 2 features.
model = keras.Sequential([keras.Input(shape=(2,)), layers.Dense(1, use_bias=False, kernel_initializer="ones")])


def mse(Y, Yhat):
    return (1. / (2 * T)) * ops.sum(ops.power(Y - Yhat, 2))


model.compile(optimizer=keras.optimizers.SGD(0.0005), loss=mse)
# PORT: 100 full-batch sess.run(trainer) steps -> fit with batch_size=T for 100 epochs.
history = model.fit(x.T, y.T, batch_size=T, epochs=100, shuffle=False, verbose=0)
print("MSE", history.history["loss"][-1])
