"""Claim: guarding and logging do not grow the memory of training with the model.

Each contender trains each model in its own process (one `fit` of a few
steps, Adam, the Logger's first step a histogram step). What is measured is
what `fit` adds: the process's peak resident memory (`ru_maxrss`) after
`fit` minus its resident memory just before, and on a GPU the peak of
`tf.config.experimental.get_memory_info("GPU:0")` during `fit` minus the
memory in use before it. Printed as a ratio to plain `fit`'s growth.

Contenders: plain `fit`; `tfguard.guard(policy="skip")`;
`guard(forward="layers")`; `tfguard.Logger()` defaults (scalars every 10
steps, histograms of weights, gradients and activations every 100: step 0
is one); `Logger(histograms_every=0)`; `keras.callbacks.TensorBoard(
histogram_freq=1)`, the peer; and two floors without tfguard, a
custom `train_step` as Keras writes it (`custom_step`) and the same step
applying its update under one `tf.cond` on the finiteness of every
gradient (`all_or_nothing`: LossScaleOptimizer's pattern, what any check
of a whole update before it is written costs: every gradient lives until
the decision, where plain `fit` frees each after its own update). For
attribution, not in the default set: `guard_held` (every update held by the
transaction, none gated: `hold_bytes=2**62`) and `guard_output_off`
(`forward="off"`). Models (`scale_models.py`): the 50 M and 100 M
three-layer MLP, ResNet50.

With `--run-command`, also a whole process: a script that trains the 100 M
MLP, run by `python` and by `tfguard run` (guard, Logger, live diagnosis),
peak RSS of each process.

Each contender runs `--repeats` times, interleaved; the median growth is
printed with its range (the peak moves between runs by up to ~100 MB: the
executor's op order is not fixed).

Run: `.venv/bin/python benchmarks/memory.py [--models mlp50m,mlp100m,resnet50] [--repeats 3] [--run-command]`
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = Path(__file__).resolve().parent
CONTENDERS = ("plain", "guard", "guard_layers", "logger", "logger_no_histograms", "keras_tensorboard",
              "custom_step", "all_or_nothing")
STEPS = {"mlp50m": (3, 64), "mlp100m": (3, 64), "resnet50": (3, 16), "mlp_deep200": (3, 64)}


def resident_bytes() -> int:
    """Resident bytes of this process now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def own_step(model, gated: bool) -> None:
    """Gives `model` a custom `train_step` (Keras's, written out); `gated`: applied only when every gradient is finite."""
    import tensorflow as tf

    def train_step(data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x=x, y=y, y_pred=model(x, training=True), training=True)
        variables = model.trainable_variables
        grads = tape.gradient(loss, variables)
        if not model.optimizer.built:  # as `apply` would, at the first trace (not inside the cond)
            model.optimizer.build(variables)
        if not gated:
            model.optimizer.apply(grads, variables)
            return {"loss": loss}

        def apply():
            model.optimizer.apply(grads, variables)
            return tf.constant(True)

        finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(g)) for g in grads]))
        tf.cond(finite, apply, lambda: tf.constant(False))
        return {"loss": loss}

    model.train_step = train_step


def child(model_name: str, contender: str, steps: int, batch: int) -> dict:
    """Trains `model_name` once under `contender`; returns what `fit` added (bytes)."""
    sys.path.insert(0, str(HERE))
    import keras  # noqa: F401
    import tensorflow as tf

    import tfguard
    from scale_models import MODELS, dataset

    model = MODELS[model_name]()
    data = dataset(model, steps, batch)
    for _ in data:  # fill the cache before measuring
        pass
    callbacks = []
    logdir = tempfile.mkdtemp(prefix="tfguard-memory-")
    if contender == "guard":
        tfguard.guard(model, policy="skip", quarantine_dir=None)
    elif contender == "guard_held":  # every update held (the transaction), none gated
        tfguard.guard(model, policy="skip", quarantine_dir=None, hold_bytes=2**62)
    elif contender == "guard_output_off":
        tfguard.guard(model, policy="skip", quarantine_dir=None, forward="off")
    elif contender == "guard_layers":
        tfguard.guard(model, policy="skip", forward="layers", quarantine_dir=None)
    elif contender == "logger":
        callbacks.append(tfguard.Logger(logdir))
    elif contender == "logger_no_histograms":
        callbacks.append(tfguard.Logger(logdir, histograms_every=0))
    elif contender in ("custom_step", "all_or_nothing"):
        own_step(model, gated=contender == "all_or_nothing")
    elif contender == "keras_tensorboard":
        callbacks.append(tf.keras.callbacks.TensorBoard(logdir, histogram_freq=1))
    gpu = bool(tf.config.list_physical_devices("GPU"))
    if gpu:
        tf.config.experimental.reset_memory_stats("GPU:0")
        gpu_before = tf.config.experimental.get_memory_info("GPU:0")["current"]
    before = resident_bytes()
    model.fit(data, epochs=1, verbose=0, callbacks=callbacks)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = {"model": model_name, "contender": contender, "params": model.count_params(),
              "rss_growth": max(0, peak - before)}
    if gpu:
        result["gpu_growth"] = tf.config.experimental.get_memory_info("GPU:0")["peak"] - gpu_before
    return result


def _spawn(args: list[str]) -> tuple[int, str, int]:
    """Runs a process; returns (exit status, stdout, its own peak RSS in bytes)."""
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.stdout.close()
    return os.waitstatus_to_exitcode(status), out, usage.ru_maxrss * 1024


def run_models(models: list[str], contenders: list[str], repeats: int) -> list[dict]:
    """Each contender `repeats` times per model, interleaved; the median growth of each (and its range)."""
    rows = []
    for model_name in models:
        steps, batch = STEPS.get(model_name, (3, 64))
        runs: dict[str, list[dict]] = {c: [] for c in contenders}
        for _ in range(repeats):
            for contender in contenders:
                code, out, _ = _spawn([sys.executable, __file__, "--child", model_name, contender,
                                       "--steps", str(steps), "--batch", str(batch)])
                line = [ln for ln in out.splitlines() if ln.startswith("{")]
                if code != 0 or not line:
                    print(f"{model_name} {contender}: failed (exit {code})", flush=True)
                    continue
                row = json.loads(line[-1])
                runs[contender].append(row)
                gpu = f", GPU +{row['gpu_growth'] / 2**20:.0f} MB" if "gpu_growth" in row else ""
                print(f"{model_name:9s} {contender:22s} RSS +{row['rss_growth'] / 2**20:.0f} MB{gpu}", flush=True)
        for done in runs.values():
            if not done:
                continue
            row = dict(done[0])
            for key in ("rss_growth", "gpu_growth"):
                if key in row:
                    values = sorted(r[key] for r in done)
                    row[key] = statistics.median(values)
                    row[key + "_range"] = (values[0], values[-1])
            rows.append(row)
    return rows


def table(rows: list[dict]) -> None:
    print("\n| model | contender | RSS growth MB (median, range) | x plain | GPU peak growth MB | x plain |")
    print("|---|---|---|---|---|---|")
    plain = {r["model"]: r for r in rows if r["contender"] == "plain"}
    for r in rows:
        base = plain.get(r["model"])
        ratio = f"{r['rss_growth'] / base['rss_growth']:.2f}" if base and base["rss_growth"] else "–"
        gpu = gratio = "–"
        if "gpu_growth" in r:
            gpu = f"{r['gpu_growth'] / 2**20:.0f}"
            if base and base.get("gpu_growth"):
                gratio = f"{r['gpu_growth'] / base['gpu_growth']:.2f}"
        low, high = r.get("rss_growth_range", (r["rss_growth"], r["rss_growth"]))
        print(f"| {r['model']} ({r['params'] / 1e6:.1f} M) | {r['contender']} | "
              f"{r['rss_growth'] / 2**20:.0f} ({low / 2**20:.0f}-{high / 2**20:.0f}) | {ratio} | {gpu} | {gratio} |")


SCRIPT = """
import sys
sys.path.insert(0, {here!r})
from scale_models import mlp_wide, dataset
model = mlp_wide(100_000_000)
model.fit(dataset(model, 3, 64), epochs=1, verbose=0)
print("trained")
"""


def run_command(repeats: int) -> None:
    """Peak RSS of `python script.py` and `tfguard run script.py` (the 100 M MLP), interleaved."""
    folder = Path(tempfile.mkdtemp(prefix="tfguard-memory-run-"))
    script = folder / "train_100m.py"
    script.write_text(textwrap.dedent(SCRIPT.format(here=str(HERE))))
    tfguard_bin = Path(sys.executable).with_name("tfguard")
    peaks = {"python": [], "tfguard run": []}
    for _ in range(repeats):
        for name, args in (("python", [sys.executable, str(script)]),
                           ("tfguard run", [str(tfguard_bin), "run", "--logdir", str(folder / "runs"),
                                            str(script)])):
            code, _, peak = _spawn(args)
            peaks[name].append(peak)
            print(f"{name:12s} exit {code} peak RSS {peak / 2**20:.0f} MB", flush=True)
    python, attached = min(peaks["python"]), min(peaks["tfguard run"])
    print(f"\ntfguard run / python peak RSS (100 M MLP): {attached / 2**20:.0f} / {python / 2**20:.0f} MB"
          f" = {attached / python:.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "CONTENDER"))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--models", default="mlp50m,mlp100m,resnet50")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--run-command", action="store_true")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, args.steps, args.batch)), flush=True)
        return
    rows = run_models(args.models.split(","), args.contenders.split(","), args.repeats)
    table(rows)
    if args.run_command:
        run_command(args.repeats)


if __name__ == "__main__":
    main()
