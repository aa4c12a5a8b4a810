"""A training process for the kill and disk-full tests (run as `python child.py MODE LOGDIR`).

Modes:
  sigterm  - writes `ready` with the step after step 7 (mid-epoch), then sleeps in a callback;
             the parent sends SIGTERM.
  sigkill  - as sigterm, after one full epoch (flushed) and 3 more steps; the parent sends SIGKILL.
  sigint   - sends itself SIGINT after step 7; catches KeyboardInterrupt and leaves with
             os._exit (no atexit, no close): only the SIGINT-time flush saved the logs.
  diskfull - file size limit of 6 kB for everything written (SIGXFSZ ignored): writes fail
             mid-training; prints `finished <epochs>` if training completed.
  diskfull-strict - the same with strict=True; prints the error class on stop.
The logger never flushes by itself here (huge queue, huge flush interval), so whatever is
on disk was flushed by an epoch end or by the signal handlers.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import tfguard.summary  # noqa: E402


def model():
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu", name="h"),
                          keras.layers.Dense(3, activation="softmax", name="o")], name="child")
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return m


class Pause(keras.callbacks.Callback):
    def __init__(self, at_step, logdir, action):
        super().__init__()
        self.at_step, self.logdir, self.action = at_step, logdir, action

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if step != self.at_step:
            return
        if self.action == "sigint":
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
            return
        with open(os.path.join(self.logdir, "ready.tmp"), "w") as handle:
            handle.write(str(step))
        os.replace(os.path.join(self.logdir, "ready.tmp"), os.path.join(self.logdir, "ready"))
        for _ in range(600):
            time.sleep(0.1)


def main(mode: str, logdir: str) -> int:
    x = np.random.default_rng(0).random((80, 4)).astype("float32")
    y = np.arange(80) % 3
    m = model()
    strict = mode == "diskfull-strict"
    logger = tfguard.summary.Logger(logdir, {"mode": mode}, scalars_every=1, histograms_every=0,
                                    max_queue=100_000, flush_millis=3_600_000, strict=strict)
    callbacks = [logger]
    if mode == "sigterm":
        callbacks.append(Pause(7, logdir, "wait"))
    elif mode == "sigkill":
        callbacks.append(Pause(13, logdir, "wait"))  # 10 steps per epoch: epoch 1 ends at step 10
    elif mode == "sigint":
        callbacks.append(Pause(7, logdir, "sigint"))
    elif mode.startswith("diskfull"):
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            m.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=callbacks)
        except KeyboardInterrupt:
            sys.stdout.write("interrupted\n")
            sys.stdout.flush()
            os._exit(0)
        except Exception as error:  # diskfull-strict
            sys.stdout.write(f"stopped {type(error).__name__}: {error}\n")
            return 3
    summary_warnings = [w for w in caught if issubclass(w.category, tfguard.summary.SummaryWarning)]
    sys.stdout.write(f"finished {len(m.history.epoch)} warnings {len(summary_warnings)}\n")
    for w in summary_warnings:
        sys.stdout.write(f"warning {w.message}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
