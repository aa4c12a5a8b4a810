"""Claim: guarding training costs little. Step time of the reference CNN, interleaved.

Contenders, all on the same data in one process, round-robin after a warm-up:
plain Keras `fit` step; `tfguard.guard` default (data, model output, loss,
gradients, update, and the whole step rolled back when rejected);
`guard(forward="layers")` (every layer's output);
`tf.debugging.enable_check_numerics()`; `enable_dump_debug_info(...,
"CURT_HEALTH")`; a hand-written train step asserting the loss and every
gradient finite with control dependencies. And a model with its own
`train_step` (a small DCGAN: two optimizers, no `call()`), unguarded and
guarded: the guarded one is compared with the unguarded one.

Each contender's train function is traced once with its own global mode on
(check_numerics and the debugger instrument graphs at trace time), then the
rounds call the traced functions. Prints the median step time and its ratio
against plain `fit` (the GAN: against the unguarded GAN).

A second plain model is a contender of its own ("plain fit, a second
model"): what two identical models differ by in one run is the figure's
resolution on the machine it ran on.

With `--ops`, the plain and the guarded step are also traced with the
TensorFlow profiler (one after the other, in this process) and the time of
their kernels compared, op type by op type: what the guard adds to a step,
without the wall clock's noise.

Run: `.venv/bin/python benchmarks/guard_overhead.py [--rounds 8 --steps 25] [--ops]`
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfguard  # noqa: E402


def reference_cnn(model_class=keras.Model) -> keras.Model:
    """The reference CNN (docs/benchmarks.md, "Guard overhead"), compiled with Adam."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((28, 28, 1))
    h = keras.layers.Conv2D(32, 3, activation="relu")(inputs)
    h = keras.layers.MaxPooling2D()(h)
    h = keras.layers.Conv2D(64, 3, activation="relu")(h)
    h = keras.layers.MaxPooling2D()(h)
    h = keras.layers.Flatten()(h)
    h = keras.layers.Dense(128, activation="relu")(h)
    h = keras.layers.Dropout(0.3)(h)
    outputs = keras.layers.Dense(10, activation="softmax")(h)
    model = model_class(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


class AssertingModel(keras.Model):
    """The hand-written pattern: assert the loss and every gradient finite before applying."""

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred)
        grads = tape.gradient(loss, self.trainable_variables)
        asserts = [tf.debugging.assert_all_finite(loss, "loss")]
        asserts += [tf.debugging.assert_all_finite(g, "gradient") for g in grads if g is not None]
        with tf.control_dependencies(asserts):
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return self.compute_metrics(x, y, y_pred)


class GAN(keras.Model):
    """keras-io's DCGAN shape: two optimizers, its own compile and train_step, no call()."""

    def __init__(self, latent_dim=32):
        super().__init__()
        self.latent_dim = latent_dim
        self.discriminator = keras.Sequential([
            keras.Input((28, 28, 1)), keras.layers.Conv2D(32, 4, strides=2, padding="same"),
            keras.layers.LeakyReLU(0.2), keras.layers.Conv2D(64, 4, strides=2, padding="same"),
            keras.layers.LeakyReLU(0.2), keras.layers.Flatten(), keras.layers.Dense(1)],
            name="discriminator")
        self.generator = keras.Sequential([
            keras.Input((latent_dim,)), keras.layers.Dense(7 * 7 * 32), keras.layers.LeakyReLU(0.2),
            keras.layers.Reshape((7, 7, 32)),
            keras.layers.Conv2DTranspose(32, 4, strides=2, padding="same"), keras.layers.LeakyReLU(0.2),
            keras.layers.Conv2DTranspose(16, 4, strides=2, padding="same"), keras.layers.LeakyReLU(0.2),
            keras.layers.Conv2D(1, 5, padding="same", activation="sigmoid")], name="generator")
        self.seed_generator = keras.random.SeedGenerator(1337)

    def compile(self, **kwargs):
        super().compile(**kwargs)
        self.d_optimizer = keras.optimizers.Adam(1e-4)
        self.g_optimizer = keras.optimizers.Adam(1e-4)
        self.loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)
        self.d_loss_metric = keras.metrics.Mean(name="d_loss")
        self.g_loss_metric = keras.metrics.Mean(name="g_loss")

    @property
    def metrics(self):
        return [self.d_loss_metric, self.g_loss_metric]

    def train_step(self, data):
        real, _ = data
        batch = tf.shape(real)[0]
        noise = keras.random.normal((batch, self.latent_dim), seed=self.seed_generator)
        fake = self.generator(noise)
        images = tf.concat([fake, real], axis=0)
        labels = tf.concat([tf.ones((batch, 1)), tf.zeros((batch, 1))], axis=0)
        with tf.GradientTape() as tape:
            d_loss = self.loss_fn(labels, self.discriminator(images))
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
        noise = keras.random.normal((batch, self.latent_dim), seed=self.seed_generator)
        with tf.GradientTape() as tape:
            g_loss = self.loss_fn(tf.zeros((batch, 1)), self.discriminator(self.generator(noise)))
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
        self.d_loss_metric.update_state(d_loss)
        self.g_loss_metric.update_state(g_loss)
        return {"loss": self.d_loss_metric.result(), "g_loss": self.g_loss_metric.result()}


def small_gan() -> GAN:
    keras.utils.set_random_seed(0)
    model = GAN()
    model.compile()
    return model


def dataset(batch: int) -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    x = rng.random((batch * 16, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, batch * 16)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True).repeat().prefetch(2)


class Contender:
    def __init__(self, name, model, enter=None, leave=None, base=None):
        self.name, self.model, self.enter, self.leave = name, model, enter, leave
        self.base = base  # the contender this one is compared with (None: plain fit)
        self.times: list[float] = []

    def prepare(self, ds):
        self.iterator = iter(ds)
        with self._mode():
            self.model.make_train_function()
            for _ in range(3):  # trace + warm up
                self.model.train_function(self.iterator)

    def run(self, steps: int) -> None:
        with self._mode():
            start = time.perf_counter()
            for _ in range(steps):
                logs = self.model.train_function(self.iterator)
            float(logs["loss"])
            self.times.append((time.perf_counter() - start) / steps)

    def _mode(self):
        contender = self

        class Mode:
            def __enter__(self):
                if contender.enter:
                    contender.enter()

            def __exit__(self, *exc):
                if contender.leave:
                    contender.leave()

        return Mode()


HEAVY = ("Conv2D", "MaxPool", "MatMul", "ReluGrad", "Softmax")
"""Kernels both steps run alike (the model's own compute): told apart from what the guard adds."""
MARKERS = frozenset({"Process", "IfOp", "Start", "Done", "ExecutorDoneCallback", "FunctionRun", "Record",
                     "StartRegion", "StopRegion", "MemoryAllocation", "MemoryDeallocation"})
"""Profiler events that span other kernels (a cond's branch, a function call) or mark them: not summed."""


def op_times(model, ds, steps: int) -> tuple[dict, float]:
    """Per op type, the kernel time of `steps` steps of `model` (ms a step), traced by the TensorFlow profiler."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    iterator = iter(ds)
    logdir = tempfile.mkdtemp(prefix="tfguard-ops-")
    tf.profiler.experimental.start(logdir)
    for _ in range(steps):
        logs = model.train_function(iterator)
    float(logs["loss"])
    tf.profiler.experimental.stop()
    times, nodes = {}, 0
    for root, _, files in os.walk(logdir):
        for name in files:
            if not name.endswith(".xplane.pb"):
                continue
            space = xplane_pb2.XSpace()
            with open(os.path.join(root, name), "rb") as f:
                space.ParseFromString(f.read())
            for plane in space.planes:
                for line in plane.lines:
                    if not line.name.startswith("tf_Compute"):
                        continue
                    for event in line.events:
                        op = plane.event_metadata[event.metadata_id].name.rsplit(":", 1)[-1]
                        if op in MARKERS:
                            nodes += op == "Process"
                            continue
                        times[op] = times.get(op, 0.0) + event.duration_ps / 1e9 / steps
    return times, nodes / steps


def print_ops(plain, guarded, ds, steps: int) -> None:
    base, nodes_p = op_times(plain, ds, steps)
    mine, nodes_g = op_times(guarded, ds, steps)

    def split(times):
        heavy = sum(t for op, t in times.items() if any(h in op for h in HEAVY))
        return heavy, sum(times.values()) - heavy

    (heavy_p, rest_p), (heavy_g, rest_g) = split(base), split(mine)
    print(f"\nkernel time a step (profiler, {steps} steps each): plain {heavy_p + rest_p:.3f} ms, "
          f"guard {heavy_g + rest_g:.3f} ms")
    print(f"  the model's convolutions/matmuls: plain {heavy_p:.3f} ms, guard {heavy_g:.3f} ms")
    print(f"  every other kernel: plain {rest_p:.3f} ms, guard {rest_g:.3f} ms: "
          f"the guard adds {rest_g - rest_p:+.3f} ms = {(rest_g - rest_p) / (heavy_p + rest_p):+.2%} of plain's step")
    deltas = sorted(((mine.get(op, 0.0) - base.get(op, 0.0), op) for op in set(base) | set(mine)
                     if not any(h in op for h in HEAVY)), reverse=True)
    print(f"  kernels run a step: plain {nodes_p:.0f}, guard {nodes_g:.0f} (each costs the executor a few us more)")
    print("  largest additions: " + ", ".join(f"{op} {d:+.3f}" for d, op in deltas[:6]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1,
                        help="TensorFlow intra/inter-op threads (1: stable figures on a shared 2-core box)")
    parser.add_argument("--ops", action="store_true",
                        help="also compare the kernels of the plain and the guarded step (TensorFlow profiler)")
    parser.add_argument("--ops-steps", type=int, default=100)
    args = parser.parse_args(argv)
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    quarantine = tempfile.mkdtemp(prefix="tfguard-bench-")
    dump_root = tempfile.mkdtemp(prefix="tfguard-dump-")
    contenders = [
        Contender("plain fit", reference_cnn()),
        Contender("plain fit, a second model", reference_cnn()),
        Contender("guard (default)", tfguard.guard(reference_cnn(), quarantine_dir=quarantine)),
        Contender(
            "guard (every layer)",
            tfguard.guard(reference_cnn(), forward="layers", quarantine_dir=quarantine),
        ),
        Contender(
            "enable_check_numerics",
            reference_cnn(),
            tf.debugging.enable_check_numerics,
            tf.debugging.disable_check_numerics,
        ),
        Contender(
            "dump_debug_info CURT_HEALTH",
            reference_cnn(),
            lambda: tf.debugging.experimental.enable_dump_debug_info(
                tempfile.mkdtemp(dir=dump_root), tensor_debug_mode="CURT_HEALTH",
                circular_buffer_size=1000,
            ),
            tf.debugging.experimental.disable_dump_debug_info,
        ),
        Contender("hand-written asserts", reference_cnn(AssertingModel)),
    ]
    gan = Contender("GAN, own train_step", small_gan())
    contenders += [gan, Contender("GAN, guard (default)",
                                  tfguard.guard(small_gan(), quarantine_dir=quarantine), base=gan)]
    ds = dataset(args.batch)
    for contender in contenders:
        contender.prepare(ds)
    for _ in range(args.rounds):
        for contender in contenders:
            contender.run(args.steps)
    plain = contenders[0]
    print(f"guard overhead: reference CNN, batch {args.batch}, {args.rounds} rounds x {args.steps} steps, "
          f"{args.threads or 'default'} TF thread(s), TF {tf.__version__}, Keras {keras.__version__}")
    print("ratio = median over rounds of (contender step time / its base's step time in the same round);"
          " the base is plain fit, or the unguarded GAN for the guarded one")
    print(f"{'contender':32s} {'median ms/step':>15s} {'ratio vs base':>15s}")
    for contender in contenders:
        median = statistics.median(contender.times)
        base = (contender.base or plain).times
        ratio = statistics.median(t / b for t, b in zip(contender.times, base))
        print(f"{contender.name:32s} {median * 1000:15.2f} {ratio:14.3f}x")
    if args.ops:
        print_ops(contenders[0].model, contenders[2].model, ds, args.ops_steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
