"""Claim: a sweep under tfguard keeps none of the models it dropped, as plain Keras keeps none.

A sweep, a notebook or a script trains model after model in one process and
keeps none of them. Each contender runs in its own process: `--models`
models one after the other (the 1 M-parameter MLP: Dense(1024) x 2 on 64
features, Adam: ~12 MB of weights and slots each; `--width` sets the layers), each one `fit` of a few
steps, dropped before the next. Printed per contender: the resident memory
(`/proc/self/statm`) after a full garbage collection following the third
model and the last, their difference per model, how many of the models are
still alive (weak references: the claim), and the wall time of the whole
process. The resident memory is printed beside it, not judged: after a full
collection it keeps growing by about a model's weights and slots per model
under plain Keras too, its models all freed (not traced further; likely
the C allocator's per-thread arenas), so over a few models it moves by as much between runs as between contenders.

Contenders: plain `fit`; `tfguard.guard(policy="skip")`; `tfguard.Logger()`
with a `LiveDiagnosis` (both callbacks of `tfguard run`); the models fitted
inside a `tfguard.attach.attached()` session (what `tfguard run sweep.py`
does). Before what tfguard attaches to a model lived on the model instead
of in tfguard's registries (c11afa8), every guarded or logged model stayed alive until the process
ended.

Run: `.venv/bin/python benchmarks/sweep_memory.py [--models 20] [--width 1024] [--contenders plain,guard,logger,session]`
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CONTENDERS = ("plain", "guard", "logger", "session")


def _child(contender: str, models: int, width: int) -> dict:
    """Runs the sweep in this process; returns the memory after the third and the last model."""
    import contextlib
    import gc
    import tempfile
    import weakref

    import keras
    import numpy as np

    import tfguard
    from memory import resident_bytes
    from tfguard.attach import attached
    from tfguard.diagnose import LiveDiagnosis

    x = np.random.default_rng(0).normal(size=(256, 64)).astype("float32")
    y = x[:, :1]
    logdir = tempfile.mkdtemp()

    def resident_mb() -> float:
        gc.collect()
        return resident_bytes() / 2**20

    refs, marks = [], {}
    session = attached(logdir=logdir, policy="skip") if contender == "session" else contextlib.nullcontext()
    with session:
        for index in range(1, models + 1):
            model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(width, activation="relu"),
                                      keras.layers.Dense(width, activation="relu"), keras.layers.Dense(1)])
            model.compile(optimizer="adam", loss="mse")
            callbacks = []
            if contender == "guard":
                tfguard.guard(model, policy="skip", quarantine_dir=os.path.join(logdir, "quarantine"))
            if contender == "logger":
                callbacks = [tfguard.Logger(logdir), LiveDiagnosis()]
            model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=callbacks)
            refs.append(weakref.ref(model))
            del model, callbacks
            if index in (3, models):
                marks[index] = resident_mb()
    return {"third": marks[3], "last": marks[models], "alive": sum(r() is not None for r in refs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--width", type=int, default=1024, help="units of the two hidden layers (1024: ~1 M parameters)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.models < 4:
        parser.error(f"--models must be at least 4 (the memory per model is measured from the third model to the last); "
                     f"received {args.models}")
    if args.child:
        print(json.dumps(_child(args.child, args.models, args.width)))
        return
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "")}
    rows = []
    for contender in args.contenders.split(","):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, __file__, "--child", contender, "--models", str(args.models), "--width", str(args.width)],
                              capture_output=True, text=True, env=env, check=True)
        seconds = time.perf_counter() - start
        result = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append((contender, result, seconds))
    parameters = 64 * args.width + args.width * args.width + 3 * args.width + 1
    print(f"{args.models} models of {parameters / 1e6:.1f} M parameters (Adam: {12 * parameters / 2**20:.0f} MB of "
          "weights and slots each), one fit each, dropped one after the other")
    print(f"{'contender':<10} {'RSS after 3rd':>14} {'after last':>11} {'MB per model':>13} {'alive':>7} {'wall s':>7}")
    for contender, result, seconds in rows:
        per_model = (result["last"] - result["third"]) / (args.models - 3)
        print(f"{contender:<10} {result['third']:>11.0f} MB {result['last']:>8.0f} MB {per_model:>13.1f} "
              f"{result['alive']:>4}/{args.models} {seconds:>7.1f}")


if __name__ == "__main__":
    main()
