"""A small training job for the watch test (run as `python -m tests.watch.job LOGDIR EPOCHS`).

A tiny Keras classifier on random data, logged at once by tfguard's Logger
(`LOGDIR/tfguard`) and by the stock `keras.callbacks.TensorBoard` callback
(`LOGDIR/keras`). From the dataset's epoch `BAD_EPOCH` on (counted by its
`on_epoch_end` calls), every batch is NaN (a data fault), so the loss and the
gradients are NaN from then on. Each epoch ends with a pause, so the
job is still running long after the fault is on disk; it prints `epoch N`
after each epoch's logs are flushed.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import tfguard  # noqa: E402

BAD_EPOCH = 2
PAUSE_S = 0.5


class Batches(keras.utils.PyDataset):
    """8 batches of 16 examples; all NaN from `BAD_EPOCH` on."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.x = rng.normal(size=(128, 4)).astype("float32")
        self.y = rng.integers(0, 3, size=128)
        self.epoch = 0

    def __len__(self):
        return 8

    def __getitem__(self, index):
        x = self.x[index * 16 : (index + 1) * 16].copy()
        if self.epoch >= BAD_EPOCH:
            x[:] = np.nan
        return x, self.y[index * 16 : (index + 1) * 16]

    def on_epoch_end(self):
        self.epoch += 1


class Pause(keras.callbacks.Callback):
    """Says the epoch is logged, then pauses: the job goes on for a while."""

    def on_epoch_end(self, epoch, logs=None):
        print(f"epoch {epoch}", flush=True)
        time.sleep(PAUSE_S)


def main(logdir: str, epochs: int) -> int:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(3, activation="softmax")], name="job")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    callbacks = [tfguard.Logger(os.path.join(logdir, "tfguard"), run_subdir=False, histograms=False,
                                images=0),
                 keras.callbacks.TensorBoard(os.path.join(logdir, "keras"), histogram_freq=0,
                                             write_graph=False),
                 Pause()]
    model.fit(Batches(), epochs=epochs, verbose=0, callbacks=callbacks)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
