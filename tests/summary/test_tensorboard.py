"""The real TensorBoard server finds what the Logger wrote (runs, tags, hparams, projector)."""

from __future__ import annotations

import urllib.parse

import pytest

from tests.summary.conftest import tiny_cnn
from tests.summary.tensorboard_server import get, get_bytes, poll, serve
from tfguard import _tags
from tfguard.summary import Logger

pytestmark = pytest.mark.slow


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
    with serve(logdir) as base:
        runs = poll(lambda: [r for r in get(base, "/data/runs") if r.startswith("tiny/")]
                     if len(get(base, "/data/runs")) >= 2 else None, "two runs")
        assert len(runs) == 2 and all(r.startswith(("tiny/lr_0.01_", "tiny/lr_1e-3_")) for r in runs)
        run = sorted(runs)[0]

        plugins = poll(lambda: (lambda p: p if p.get("projector", {}).get("enabled") else None)(
            get(base, "/data/plugins_listing")), "the projector plugin enabled")
        for name in ("scalars", "histograms", "hparams", "text", "images", "projector"):
            assert plugins[name]["enabled"], name

        scalars = get(base, "/data/plugin/scalars/tags")[run]
        for tag in ("train/loss", "val/loss", "batch/loss", _tags.GLOBAL_GRAD_NORM, _tags.LEARNING_RATE,
                    "weight_norm/conv", "update_ratio/hidden", "activation/dead_fraction/conv"):
            assert tag in scalars, tag
        histograms = get(base, "/data/plugin/histograms/tags")[run]
        for tag in ("hist/weights/tiny/conv/kernel", "hist/gradients/tiny/out/bias", "hist/activations/hidden"):
            assert tag in histograms, tag
        texts = get(base, "/data/plugin/text/tags")[run]
        assert {_tags.CONFIG_HPARAMS, _tags.CONFIG_MODEL} <= set(texts)
        query = urllib.parse.urlencode({"run": run, "tag": "train/loss"})
        points = get(base, f"/data/plugin/scalars/scalars?{query}")
        assert [p[1] for p in points] == [5, 10]  # [wall_time, step, value]; 36 samples, batch 8

        experiment = get(base, "/data/plugin/hparams/experiment", {"experimentName": ""})
        assert sorted(h["name"] for h in experiment["hparamInfos"]) == ["lr", "optimizer"]
        metric_tags = {m["name"]["tag"] for m in experiment["metricInfos"]}
        assert {"val/loss", "train/loss"} <= metric_tags
        groups = get(base, "/data/plugin/hparams/session_groups", {
            "experimentName": "", "allowedStatuses": ["STATUS_SUCCESS", "STATUS_UNKNOWN", "STATUS_RUNNING",
                                                       "STATUS_FAILURE"],
            "colParams": [], "startIndex": 0, "sliceSize": 10})
        assert groups["totalSize"] == 2

        projector_runs = poll(lambda: get(base, "/data/plugin/projector/runs"), "projector runs")
        assert sorted(projector_runs) == sorted(runs)
        info = get(base, "/data/plugin/projector/info?" + urllib.parse.urlencode({"run": run}))
        (embedding,) = info["embeddings"]
        assert embedding["tensorName"] == "hidden" and [int(d) for d in embedding["tensorShape"]] == [12, 8]
        assert embedding["metadataPath"].endswith("hidden_metadata.tsv")
        query = urllib.parse.urlencode({"run": run, "name": "hidden"})
        assert len(get_bytes(base, f"/data/plugin/projector/tensor?{query}")) == 12 * 8 * 4  # float32 values, as the projector loads them
        metadata = get_bytes(base, f"/data/plugin/projector/metadata?{query}").decode()
        assert metadata.splitlines()[:3] == ["0", "1", "2"]
