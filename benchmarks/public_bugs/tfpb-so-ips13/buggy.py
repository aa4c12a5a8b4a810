"""Logistic regression on the South African heart disease data (Stack Overflow question 45002504), buggy version.

Ported from TensorFlow-Program-Bugs StackOverflow/IPS-13/45002504-buggy/q2_linear_logistic_regression.py.
"""
import keras
import numpy as np
from keras import layers

keras.utils.set_random_seed(20180130)

BATCH_SIZE = 7
N_FEATURES = 9
BETA = 1  # regularizer
EPOCHS = 1000
LEARNING_RATE = 0.5

# PORT: heart_train.csv (SAheart: sbp, tobacco, ldl, adiposity, famhist, typea, obesity, alcohol, age;
# label chd) -> 413 synthetic rows with the same columns, units and spreads, and a logistic label.
rng = np.random.default_rng(45002504)
n_train_data = 413
age = rng.uniform(15, 64, n_train_data)
tobacco = rng.gamma(0.8, 4.5, n_train_data)
ldl = rng.normal(4.7, 2.1, n_train_data).clip(1, 15)
famhist = (rng.random(n_train_data) < 0.42).astype(float)
features = np.stack([
    rng.normal(138, 20, n_train_data),          # sbp
    tobacco,
    ldl,
    rng.normal(25.4, 7.8, n_train_data),        # adiposity
    famhist,                                    # famhist: Present -> 1.0, Absent -> 0.0
    rng.normal(53, 9.8, n_train_data),          # typea
    rng.normal(26, 4.2, n_train_data),          # obesity
    rng.gamma(0.5, 34, n_train_data),           # alcohol
    age,
], axis=1).astype("float32")
logit = -6.0 + 0.05 * age + 0.08 * tobacco + 0.17 * ldl + 0.9 * famhist
chd = (rng.random(n_train_data) < 1 / (1 + np.exp(-logit))).astype(int)
labels = np.stack([1 - chd, chd], axis=1).astype("float32")

# PORT: score = X w + b with w ~ truncated_normal([9, 2]), b zeros, and loss =
# mean(softmax_cross_entropy(score) + BETA * l2_loss(w)) -> a Dense layer with an L2 regularizer
# (tf.nn.l2_loss is sum(w**2) / 2).
model = keras.Sequential([
    keras.Input(shape=(N_FEATURES,)),
    layers.Dense(2, kernel_initializer=keras.initializers.TruncatedNormal(stddev=1.0), bias_initializer="zeros",
                 kernel_regularizer=keras.regularizers.L2(BETA / 2)),
])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=LEARNING_RATE),
              loss=keras.losses.CategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
# PORT: 1000 epochs of shuffled batches of 7 from a TF1 queue -> fit for 20 epochs of 59 steps.
history = model.fit(features, labels, batch_size=BATCH_SIZE, epochs=20, verbose=0)
print("avg_loss", [round(v, 3) for v in history.history["loss"][::4]], "avg_acc", history.history["accuracy"][-1])
