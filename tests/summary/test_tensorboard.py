"""The real TensorBoard server finds what the Logger wrote (runs, tags, hparams, projector)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from tests.summary.conftest import tiny_cnn
from tfguard import tags
from tfguard.summary import Logger

pytestmark = pytest.mark.slow
TIMEOUT = 90.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(base, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read().decode())


def _poll(fn, what):
    deadline = time.monotonic() + TIMEOUT
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except OSError as error:  # not listening yet, or a 5xx while loading
            last = error
        time.sleep(0.5)
    raise AssertionError(f"TensorBoard never showed {what}; last answer: {last!r}")


@pytest.fixture
def logdir(tmp_path, images):
    x, y = images
    for lr in (0.01, 0.001):
        model = tiny_cnn(lr=lr)
        logger = Logger(tmp_path, {"lr": lr, "optimizer": "adam"}, scalars_every=2, histograms_every=3,
                        embeddings=("hidden", x[:12], y[:12]))
        model.fit(x, y, batch_size=8, epochs=2, validation_split=0.25, verbose=0, callbacks=[logger])
    return tmp_path


def test_tensorboard_serves_every_plugin(logdir):
    port = _free_port()
    binary = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    server = subprocess.Popen(
        [binary, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port), "--reload_interval", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        runs = _poll(lambda: [r for r in _get(base, "/data/runs") if r.startswith("tiny/")]
                     if len(_get(base, "/data/runs")) >= 2 else None, "two runs")
        assert len(runs) == 2 and all(r.startswith(("tiny/lr_0.01_", "tiny/lr_1e-3_")) for r in runs)
        run = sorted(runs)[0]

        plugins = _poll(lambda: (lambda p: p if p.get("projector", {}).get("enabled") else None)(
            _get(base, "/data/plugins_listing")), "the projector plugin enabled")
        for name in ("scalars", "histograms", "hparams", "text", "images", "projector"):
            assert plugins[name]["enabled"], name

        scalars = _get(base, "/data/plugin/scalars/tags")[run]
        for tag in ("train/loss", "val/loss", "batch/loss", tags.GLOBAL_GRAD_NORM, tags.LEARNING_RATE,
                    "weight_norm/conv", "update_ratio/hidden", "activation/dead_fraction/conv"):
            assert tag in scalars, tag
        histograms = _get(base, "/data/plugin/histograms/tags")[run]
        for tag in ("hist/weights/tiny/conv/kernel", "hist/gradients/tiny/out/bias", "hist/activations/hidden"):
            assert tag in histograms, tag
        texts = _get(base, "/data/plugin/text/tags")[run]
        assert {tags.CONFIG_HPARAMS, tags.CONFIG_MODEL} <= set(texts)
        query = urllib.parse.urlencode({"run": run, "tag": "train/loss"})
        points = _get(base, f"/data/plugin/scalars/scalars?{query}")
        assert [p[1] for p in points] == [5, 10]  # [wall_time, step, value]; 36 samples, batch 8

        experiment = _get(base, "/data/plugin/hparams/experiment", {"experimentName": ""})
        assert sorted(h["name"] for h in experiment["hparamInfos"]) == ["lr", "optimizer"]
        metric_tags = {m["name"]["tag"] for m in experiment["metricInfos"]}
        assert {"val/loss", "train/loss"} <= metric_tags
        groups = _get(base, "/data/plugin/hparams/session_groups", {
            "experimentName": "", "allowedStatuses": ["STATUS_SUCCESS", "STATUS_UNKNOWN", "STATUS_RUNNING",
                                                       "STATUS_FAILURE"],
            "colParams": [], "startIndex": 0, "sliceSize": 10})
        assert groups["totalSize"] == 2

        projector_runs = _poll(lambda: _get(base, "/data/plugin/projector/runs"), "projector runs")
        assert sorted(projector_runs) == sorted(runs)
        info = _get(base, "/data/plugin/projector/info?" + urllib.parse.urlencode({"run": run}))
        (embedding,) = info["embeddings"]
        assert embedding["tensorName"] == "hidden" and [int(d) for d in embedding["tensorShape"]] == [12, 8]
        assert embedding["metadataPath"].endswith("hidden_metadata.tsv")
        query = urllib.parse.urlencode({"run": run, "name": "hidden"})
        with urllib.request.urlopen(f"{base}/data/plugin/projector/tensor?{query}", timeout=10) as response:
            assert len(response.read()) == 12 * 8 * 4  # float32 values, as the projector loads them
        with urllib.request.urlopen(f"{base}/data/plugin/projector/metadata?{query}", timeout=10) as response:
            assert response.read().decode().splitlines()[:3] == ["0", "1", "2"]
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=20)
