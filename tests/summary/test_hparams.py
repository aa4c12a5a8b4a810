"""HParams: experiment config, session start/end and the markdown table, read back."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tensorboard.plugins.hparams import api as hp
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata as hp_metadata

from tests.summary.conftest import tiny_cnn
from tests.summary.readback import read_run
from tfguard import _tags
from tfguard._errors import ContractError
from tfguard.summary import Logger, hparams_markdown, write_hparams
from tfguard.summary._hparams import infer_domain, normalize_hparams

HPARAMS = {"lr": 0.001, "units": 32, "optimizer": "adam", "batchnorm": True}


def _experiment(run):
    (point,) = run[hp_metadata.EXPERIMENT_TAG]
    assert point.plugin == hp_metadata.PLUGIN_NAME and point.step == 0
    return hp_metadata.parse_experiment_plugin_data(point.content)


def _session_start(run):
    (point,) = run[hp_metadata.SESSION_START_INFO_TAG]
    return hp_metadata.parse_session_start_info_plugin_data(point.content)


def _session_end(run):
    return [hp_metadata.parse_session_end_info_plugin_data(p.content) for p in run[hp_metadata.SESSION_END_INFO_TAG]]


def test_write_hparams_round_trip(tmp_path):
    write_hparams(tmp_path, HPARAMS, metrics=["val/loss", "train/loss", "batch/loss"], status="success")
    run = read_run(str(tmp_path))
    experiment = _experiment(run)
    infos = {info.name: info for info in experiment.hparam_infos}
    assert sorted(infos) == sorted(HPARAMS)
    assert infos["lr"].type == api_pb2.DATA_TYPE_FLOAT64
    assert math.isclose(infos["lr"].domain_interval.min_value, 0.001)
    assert infos["units"].domain_interval.max_value == 32
    assert [v.string_value for v in infos["optimizer"].domain_discrete.values] == ["adam"]
    assert [v.bool_value for v in infos["batchnorm"].domain_discrete.values] == [False, True]
    assert [(m.name.tag, m.dataset_type) for m in experiment.metric_infos] == [
        ("val/loss", api_pb2.DATASET_VALIDATION), ("train/loss", api_pb2.DATASET_TRAINING)]
    start = _session_start(run)
    assert start.hparams["lr"].number_value == 0.001 and start.hparams["optimizer"].string_value == "adam"
    assert start.hparams["batchnorm"].bool_value is True
    assert [end.status for end in _session_end(run)] == [api_pb2.STATUS_SUCCESS]
    assert "| lr | 0.001 |" in run[_tags.CONFIG_HPARAMS][0].value


def test_domains_override_for_a_sweep(tmp_path):
    write_hparams(tmp_path, {"lr": 0.01, "opt": "sgd"},
                  domains={"lr": [1e-3, 1e-2, 1e-1], "opt": hp.Discrete(["adam", "sgd"])})
    infos = {i.name: i for i in _experiment(read_run(str(tmp_path))).hparam_infos}
    assert [v.number_value for v in infos["lr"].domain_discrete.values] == [1e-3, 1e-2, 1e-1]
    assert [v.string_value for v in infos["opt"].domain_discrete.values] == ["adam", "sgd"]
    with pytest.raises(ContractError, match="invalid domain for hyper-parameter 'lr'"):
        write_hparams(tmp_path, {"lr": 0.1}, domains={"lr": [1, "a"]})


def test_values_and_domains_are_normalized():
    assert normalize_hparams({"a": np.float32(0.5), "b": [1, 2], 3: None}) == {"a": 0.5, "b": "[1, 2]", "3": "None"}
    assert infer_domain(float("nan")) is None
    assert infer_domain(2.5).min_value == 2.5


def test_markdown_table_escapes():
    text = hparams_markdown({"a|b": "x\ny"}, {"optimizer": "Adam", "a|b": "dup"})
    assert text.splitlines() == ["| hparam | value |", "| --- | --- |", "| a\\|b | x y |", "| optimizer | Adam |"]


def test_logger_writes_the_hparams_tab(tmp_path, images):
    x, y = images
    logger = Logger(tmp_path, HPARAMS, scalars_every=0, histograms=False)
    tiny_cnn().fit(x, y, batch_size=16, epochs=2, validation_split=0.25, verbose=0, callbacks=[logger])
    run = read_run(logger.run_path)
    experiment = _experiment(run)
    assert sorted(i.name for i in experiment.hparam_infos) == sorted(HPARAMS)
    assert [m.name.tag for m in experiment.metric_infos] == [
        "val/accuracy", "val/loss", "train/accuracy", "train/loss"]
    # the metrics are the scalars the run wrote
    for metric in experiment.metric_infos:
        assert run[metric.name.tag][-1].plugin == "scalars"
    assert _session_start(run).hparams["units"].number_value == 32
    assert [end.status for end in _session_end(run)] == [api_pb2.STATUS_SUCCESS]
    table = run[_tags.CONFIG_HPARAMS][0].value
    assert "| optimizer | adam |" in table and "| epochs | 2 |" in table and "| model | tiny |" in table


def test_logger_without_hparams_writes_no_session(tmp_path, images):
    x, y = images
    logger = Logger(tmp_path, scalars_every=0, histograms=False)
    tiny_cnn().fit(x, y, batch_size=16, verbose=0, callbacks=[logger])
    run = read_run(logger.run_path)
    assert hp_metadata.SESSION_START_INFO_TAG not in run and _tags.CONFIG_HPARAMS in run
