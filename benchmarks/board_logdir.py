"""Claim: the tfguard tab answers a logdir of 100 runs in <= 2 s after the first load.

The log directory: four real trainings on sklearn's digits (64-32 MLP, 8
epochs, batch 32), each logged as a user logs it: tfguard's `Logger` on a
healthy run, on a run with a dead layer, and on a guarded run whose
firewall skips NaN batches (quarantined and replayed), and Keras's stock
`TensorBoard(histogram_freq=1)` callback. Their folders are copied to make
`--runs` runs (default 100), each with its own hparams, so the reader and
the rules see 100 runs of real event files.

Timed, the tab's `runs` route (every run's status, findings, violations
and the ranking):

- in process: `TfguardPlugin` with a real `TBContext`, werkzeug's test
  client: the first load (every run read and diagnosed), then `--repeats`
  loads of the unchanged logdir, then a load after one run grew by one
  record (that run read and diagnosed again, the others not);
- over HTTP: a real `tensorboard --logdir` process (the command beside this
  Python, with the installed entry point) on 127.0.0.1: the first GET of
  `/data/plugin/tfguard/runs`, then `--repeats` more.

Target (issue 24): every load after the first <= 2 s.

Run: `.venv/bin/python benchmarks/board_logdir.py [--runs 100] [--repeats 5]`
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

TARGET_SECONDS = 2.0


def _digits():
    import numpy as np
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = (x[order] / 16).astype("float32"), y[order].astype("int64")
    return (x[:1300], y[:1300]), (x[1300:1600], y[1300:1600])


def _model(bias: float = 0.0):
    import keras

    model = keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(64, activation="relu", name="hidden_0"),
        keras.layers.Dense(32, activation="relu", name="hidden_1",
                           bias_initializer=keras.initializers.Constant(bias)),
        keras.layers.Dense(10, activation="softmax", name="out"),
    ])
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def train_templates(root: str) -> list[str]:
    """Trains the four template runs under `root`; returns their folders."""
    import keras
    import numpy as np

    from tfguard import Logger, guard

    (x, y), val = _digits()
    folders = []
    for name, bias, poison, stock in (("healthy", 0.0, False, False), ("dead", -8.0, False, False),
                                      ("guarded", 0.0, True, False), ("keras", 0.0, False, True)):
        keras.utils.set_random_seed(0)
        folder = os.path.join(root, name)
        model = _model(bias)
        data = x.copy()
        if poison:
            data[[40, 500]] = np.nan
            model = guard(model, policy="skip", quarantine_dir=os.path.join(root, "quarantine"))
        callback = (keras.callbacks.TensorBoard(folder, histogram_freq=1) if stock
                    else Logger(folder, hparams={"lr": 1e-3, "bias": bias}, run_subdir=False))
        model.fit(data, y, batch_size=32, epochs=8, validation_data=val, verbose=0, shuffle=False,
                  callbacks=[callback])
        folders.append(folder)
    return folders


def make_logdir(templates: list[str], logdir: str, runs: int) -> None:
    """Copies the templates round-robin into `runs` run folders `run-000`, ... under `logdir`."""
    for i in range(runs):
        shutil.copytree(templates[i % len(templates)], os.path.join(logdir, f"run-{i:03d}"))


def grow_one_run(logdir: str) -> None:
    """Appends one real scalar record to the first run's event file (a job still writing)."""
    import struct

    from tensorboard.compat.proto import event_pb2

    from tfguard.events._records import frame_record

    folder = os.path.join(logdir, "run-000")
    (name,) = [n for n in os.listdir(folder) if "tfevents" in n]
    event = event_pb2.Event(step=10_000, wall_time=time.time())
    value = event.summary.value.add(tag="batch/loss")
    value.tensor.dtype = 1
    value.tensor.tensor_content = struct.pack("<f", 0.5)
    value.metadata.plugin_data.plugin_name = "scalars"
    with open(os.path.join(folder, name), "ab") as f:
        f.write(frame_record(event.SerializeToString()))


def in_process(logdir: str, repeats: int) -> dict:
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tfguard.board import TfguardPlugin

    plugin = TfguardPlugin(base_plugin.TBContext(logdir=logdir))
    apps = plugin.get_plugin_apps()
    client = Client(lambda environ, start: apps[environ["PATH_INFO"]](environ, start))

    def load() -> tuple[float, dict]:
        start = time.perf_counter()
        answer = client.get("/runs")
        seconds = time.perf_counter() - start
        assert answer.status_code == 200, answer.data[:500]
        return seconds, answer.get_json()

    first, doc = load()
    later = [load()[0] for _ in range(repeats)]
    reads = plugin.cache.reads
    grow_one_run(logdir)
    grown, _ = load()
    return {"first": first, "later": later, "grown": grown, "runs": len(doc["runs"]),
            "reads_after_growth": plugin.cache.reads - reads}


def over_http(logdir: str, repeats: int) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    binary = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    server = subprocess.Popen([binary, "--logdir", logdir, "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(base + "/data/plugins_listing", timeout=5) as r:
                    listing = json.loads(r.read())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        assert listing["tfguard"]["enabled"], listing.get("tfguard")

        def load() -> tuple[float, dict]:
            start = time.perf_counter()
            with urllib.request.urlopen(base + "/data/plugin/tfguard/runs", timeout=300) as r:
                body = r.read()
            return time.perf_counter() - start, json.loads(body)

        first, doc = load()
        later = [load()[0] for _ in range(repeats)]
        return {"first": first, "later": later, "runs": len(doc["runs"])}
    finally:
        server.terminate()
        server.wait(timeout=30)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="board-bench-")
    try:
        start = time.perf_counter()
        templates = train_templates(os.path.join(root, "templates"))
        logdir = os.path.join(root, "logs")
        make_logdir(templates, logdir, args.runs)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(logdir) for f in fs)
        print(f"logdir: {args.runs} runs, {size / 2**20:.1f} MiB of event files "
              f"(made in {time.perf_counter() - start:.1f} s)")
        local = in_process(logdir, args.repeats)
        print(f"in process ({local['runs']} runs): first load {local['first']:.2f} s; "
              f"later loads median {statistics.median(local['later']):.3f} s, max {max(local['later']):.3f} s; "
              f"after one run grew {local['grown']:.3f} s ({local['reads_after_growth']} folder read again)")
        http = over_http(logdir, args.repeats)
        print(f"tensorboard over HTTP ({http['runs']} runs): first GET {http['first']:.2f} s; "
              f"later GETs median {statistics.median(http['later']):.3f} s, max {max(http['later']):.3f} s")
        worst = max(max(local["later"]), local["grown"], max(http["later"]))
        verdict = "met" if worst <= TARGET_SECONDS else "NOT met"
        print(f"target: every load after the first <= {TARGET_SECONDS} s: {verdict} (worst {worst:.3f} s)")
        return 0 if worst <= TARGET_SECONDS else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
