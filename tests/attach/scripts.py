"""Small REAL training scripts, written into a test's tmp_path and run attached.

Each script trains a tiny Keras model for a second or two on scikit-learn's
real 8x8 digits (320 of them), exactly as a user's unmodified script would:
it knows nothing about tfguard.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

PRELUDE = """
import json
import sys

import keras
import numpy as np
from sklearn.datasets import load_digits

x, y = load_digits(return_X_y=True)
x = x[:320].astype("float32")
y = y[:320].astype("int64")
keras.utils.set_random_seed(0)
"""

HEALTHY = PRELUDE + """
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(10, activation="softmax")], name="digits_mlp")
model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
history = model.fit(x / 16.0, y, epochs={epochs}, batch_size=32, validation_split=0.2, verbose=0)
print("SCRIPT-SAYS history keys", sorted(history.history))
"""

# A hand-written GradientTape loop (no fit), with a NaN in the fourth batch.
LOOP = PRELUDE + """
import tensorflow as tf
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(10)], name="looped")
optimizer = keras.optimizers.Adam(1e-2)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
x = x / 16.0
x[100, 3] = np.nan

@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                  model.trainable_variables))
    return loss

for start in range(0, 320, 32):
    train_step(tf.constant(x[start:start + 32]), tf.constant(y[start:start + 32]))
print("SCRIPT-SAYS finite weights", all(np.isfinite(w).all() for w in model.get_weights()))
print("SCRIPT-SAYS iterations", int(optimizer.iterations.numpy()))
"""

# Learning rate 10 with SGD on an unscaled regression target: the loss overflows at step 3.
EXPLODING = PRELUDE + """
target = x.sum(1, keepdims=True) * 10.0
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(1)], name="hot")
model.compile(optimizer=keras.optimizers.SGD(10.0), loss="mse")
model.fit(x, target, epochs=2, batch_size=32, verbose=0)
print("SCRIPT-SAYS finite weights", all(np.isfinite(w).all() for w in model.get_weights()))
"""

# Five independent sigmoid units under categorical cross-entropy.
MISMATCH = PRELUDE + """
onehot = keras.utils.to_categorical(y % 5, 5)
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(5, activation="sigmoid")], name="five")
model.compile(optimizer="adam", loss="categorical_crossentropy")
model.fit(x / 16.0, onehot, epochs=2, batch_size=32, verbose=0)
"""

TINY_FIT = PRELUDE + """
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(10, activation="softmax")],
                         name="tiny")
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(x / 16.0, y, epochs=1, batch_size=64, verbose=0)
"""

EXITS = TINY_FIT + """
print("SCRIPT-SAYS before exit")
sys.exit({code})
"""

RAISES = TINY_FIT + """

def broken():
    raise ValueError("boom from the script")


broken()
"""

ARGV = """
import json
import sys

print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0],
                  "file": __file__}))
"""


def write(tmp_path: Path, source: str, name: str = "train.py", **fmt) -> Path:
    """Writes a script into tmp_path/scripts and returns its path."""
    folder = tmp_path / "scripts"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(source.format(**fmt) if fmt else source), encoding="utf-8")
    return path

# A callback ends the script with sys.exit(0) at the end of epoch 1 of 4: a successful stop.
EXITS_IN_CALLBACK = TINY_FIT.split("model.fit(")[0] + """
class Enough(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if epoch == 1:
            print("SCRIPT-SAYS enough at epoch", epoch)
            sys.exit({code})


model.fit(x / 16.0, y, epochs=4, batch_size=32, verbose=0, callbacks=[Enough()])
print("SCRIPT-SAYS never here")
"""
