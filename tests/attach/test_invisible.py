"""Attaching changes nothing: a program that fails under `python` fails the same way under `tfguard run`.

Each program below fails under plain Python. Run by `python` and by
`tfguard run` (guard, Logger and live diagnosis, and with `--no-guard
--no-logger`), as processes, it must end with the same exit status, the
same exception (type and message) raised at the same line of the script.
A debugging tool that makes a failing program pass hides the bug it was
brought in to find (issue 42: the Keras 3 diffusion example, which saves a
model its `fit` never built, completed under `tfguard run`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import keras
import numpy as np

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 4)).astype("float32")
y = rng.standard_normal((64, 1)).astype("float32")
"""

PROGRAMS = {
    # keras-io's denoising diffusion, in small: its own train_step, no call(), so fit never builds the
    # model, and a checkpoint saves it ("model not yet built" on Keras 3.15).
    "unbuilt_model_saved": PRELUDE + """
import tensorflow as tf

class Denoiser(keras.Model):
    def __init__(self):
        super().__init__()
        self.network = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                                         keras.layers.Dense(4)])
        self.ema_network = keras.models.clone_model(self.network)
        self.noise_loss_tracker = keras.metrics.Mean(name="n_loss")

    @property
    def metrics(self):
        return [self.noise_loss_tracker]

    def train_step(self, data):
        images = data
        noises = keras.random.normal(shape=tf.shape(images), seed=None)
        with tf.GradientTape() as tape:
            pred = self.network(images + noises, training=True)
            loss = self.loss(noises, pred)
        grads = tape.gradient(loss, self.network.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.network.trainable_weights))
        for weight, ema_weight in zip(self.network.weights, self.ema_network.weights):
            ema_weight.assign(0.999 * ema_weight + 0.001 * weight)
        self.noise_loss_tracker.update_state(loss)
        return {m.name: m.result() for m in self.metrics}

model = Denoiser()
model.compile(optimizer=keras.optimizers.AdamW(1e-3), loss=keras.losses.mean_absolute_error)
checkpoint = keras.callbacks.ModelCheckpoint("denoiser.weights.h5", save_weights_only=True)
model.fit(np.tile(x, (1, 1)), epochs=2, batch_size=16, callbacks=[stage], verbose=0)
print("SCRIPT-SAYS finished")
""",
    # A dataset whose third batch has the wrong width: a shape error at step 3. Not a Python generator:
    # after an error inside `from_generator`'s py_func, plain TF 2.21 hangs at exit in about 1 run in 8
    # (measured: 1 of 8 plain runs still alive after 60 s; CI saw one at 300 s), tfguard or not.
    "shape_error_at_step_3": PRELUDE + """
import tensorflow as tf

good = tf.data.Dataset.from_tensors((x[:8], y[:8]))
wide = tf.data.Dataset.from_tensors((rng.standard_normal((8, 5)).astype("float32"), y[:8]))
batches = good.repeat(2).concatenate(wide).concatenate(good.repeat(3))

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(batches, epochs=1, verbose=0)
print("SCRIPT-SAYS finished")
""",
    # A generator that calls next() on an exhausted iterator: Python turns it into RuntimeError (PEP 479).
    "stop_iteration_in_a_generator": PRELUDE + """
source = iter([(x[i:i + 16], y[i:i + 16]) for i in range(0, 32, 16)])

def batches():
    while True:
        yield next(source)

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(batches(), epochs=1, steps_per_epoch=4, verbose=0)
print("SCRIPT-SAYS finished")
""",
    # A callback that raises at the end of the first epoch.
    "callback_raises": PRELUDE + """
class Strict(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise ValueError(f"loss {logs['loss']:.3f} is not below 0.001 at epoch {epoch}")

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(x, y, epochs=3, batch_size=16, callbacks=[Strict()], verbose=0)
print("SCRIPT-SAYS finished")
""",
}

_LAST_LINE = re.compile(r"^(\w[\w.]*(?:Error|Exception|Exit|Interrupt|Iteration)\w*)(?::\s*(.*))?$")


def _ending(stderr: str, script: Path) -> tuple[str, str, int | None]:
    """The exception's type, its message's first line, and the script's line where it was raised."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    error = next(((m.group(1), (m.group(2) or "").strip()) for line in reversed(lines)
                  if (m := _LAST_LINE.match(line))), ("", ""))
    frames = re.findall(rf'File "{re.escape(str(script))}", line (\d+)', stderr)
    return error[0].rsplit(".", 1)[-1], error[1], int(frames[-1]) if frames else None


HUNG_AT_EXIT = None
"""The status of a run that printed its traceback and then hung at exit: after an error inside a
`from_generator` batch, plain TF 2.21 leaves the process hanging at exit in about 1 run in 8
(measured: 1 of 8 plain runs of such a program still alive after 60 s; CI saw one at 300 s)."""


def _wait(process: subprocess.Popen, stderr: Path, script: Path, limit: float = 300, grace: float = 20):
    """The exit status, or `HUNG_AT_EXIT` when the traceback is printed and the process is still
    alive `grace` seconds later (then killed)."""
    started, printed = time.monotonic(), None
    while True:
        try:
            return process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if printed is None and _ending(stderr.read_text(), script)[0]:
            printed = now
        if (printed is not None and now - printed > grace) or now - started > limit:
            process.kill()
            process.wait()
            assert printed is not None, f"{script} neither ended nor printed an exception in {limit} s"
            return HUNG_AT_EXIT


def _run(tmp_path: Path, name: str, *command: str) -> tuple[int | None, tuple, str]:
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    script = folder / "program.py"
    script.write_text(textwrap.dedent(PROGRAMS[name.split("+")[0]]))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TF_CPP_MIN_LOG_LEVEL": "3",
           "CUDA_VISIBLE_DEVICES": ""}
    stdout, stderr = folder / "stdout.txt", folder / "stderr.txt"
    with stdout.open("w") as out, stderr.open("w") as err:
        process = subprocess.Popen([sys.executable, *command, str(script)], cwd=folder, env=env, stdout=out,
                                   stderr=err, text=True)
        status = _wait(process, stderr, script)
    return status, _ending(stderr.read_text(), script), stdout.read_text() + stderr.read_text()


def _same_status(status: int | None, plain: int | None) -> bool:
    """Equal exit statuses; a run TF hung at exit after the traceback exited with Python's 1."""
    return (1 if status is HUNG_AT_EXIT else status) == (1 if plain is HUNG_AT_EXIT else plain)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_failing_program_fails_alike_under_tfguard_run(tmp_path, name):
    plain_status, plain_end, plain_out = _run(tmp_path, name + "+plain")
    assert _same_status(plain_status, 1) and plain_end[0] and plain_end[2], plain_out[-2000:]
    assert "SCRIPT-SAYS finished" not in plain_out
    variants = [("-m", "tfguard", "run", "--logdir", str(tmp_path / "runs"))]
    if name == "unbuilt_model_saved":
        variants.append(("-m", "tfguard", "run", "--no-guard", "--no-logger", "--logdir", str(tmp_path / "bare")))
    for number, variant in enumerate(variants):
        status, end, out = _run(tmp_path, f"{name}+tfguard{number}", *variant)
        assert "SCRIPT-SAYS finished" not in out, out[-3000:]
        assert end == plain_end and _same_status(status, plain_status), out[-3000:]
