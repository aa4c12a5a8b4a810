"""The embedding projector: TSV tensors, metadata and projector_config.pbtxt."""

from __future__ import annotations

import os

import numpy as np
import pytest
from google.protobuf import text_format
from tensorboard.plugins import projector

from tests.summary.conftest import tiny_cnn
from tfguard._errors import ContractError
from tfguard.summary import Logger, write_projector


def _config(directory):
    config = projector.ProjectorConfig()
    with open(os.path.join(directory, "projector_config.pbtxt")) as handle:
        text_format.Parse(handle.read(), config)
    return config


def test_round_trip(tmp_path):
    vectors = np.random.default_rng(0).normal(size=(6, 3))
    labels = ["cat", "dog\tx", "", "a\nb", "7", "é"]
    path = write_projector(tmp_path, vectors, labels, name="pets")
    assert path == os.path.join(tmp_path, "projector_config.pbtxt")
    (embedding,) = _config(tmp_path).embeddings
    assert (embedding.tensor_name, embedding.tensor_path, embedding.metadata_path) == (
        "pets", "pets.tsv", "pets_metadata.tsv")
    assert list(embedding.tensor_shape) == [6, 3]
    np.testing.assert_allclose(np.loadtxt(tmp_path / "pets.tsv", delimiter="\t"), vectors, rtol=1e-6)
    lines = (tmp_path / "pets_metadata.tsv").read_text(encoding="utf-8").splitlines()
    assert lines == ["cat", "dog x", "(empty)", "a b", "7", "é"]


def test_several_embeddings_share_a_config_and_replace_by_name(tmp_path):
    write_projector(tmp_path, np.ones((2, 2)), name="a")
    write_projector(tmp_path, np.ones((3, 4)), ["x", "y", "z"], name="b")
    write_projector(tmp_path, np.zeros((5, 2, 2)), name="a")
    config = _config(tmp_path)
    assert [(e.tensor_name, list(e.tensor_shape)) for e in config.embeddings] == [("b", [3, 4]), ("a", [5, 4])]
    assert not config.embeddings[1].metadata_path


@pytest.mark.parametrize(
    "embeddings, metadata, match",
    [(np.zeros(3), None, "expected a non-empty array"), (np.zeros((0, 2)), None, "non-empty"),
     (np.array([[1.0, np.nan]]), None, "expected finite values. Received: 1 non-finite"),
     (np.zeros((2, 2)), ["a"], "one label per embedding row")],
)
def test_errors_state_expectation(tmp_path, embeddings, metadata, match):
    with pytest.raises(ContractError, match=match):
        write_projector(tmp_path, embeddings, metadata)


def test_logger_writes_a_layer_embedding_at_train_end(tmp_path, images):
    x, y = images
    logger = Logger(tmp_path, scalars_every=0, histograms=False, embeddings=("hidden", x[:10], y[:10]))
    tiny_cnn().fit(x, y, batch_size=16, verbose=0, callbacks=[logger])
    (embedding,) = _config(logger.run_path).embeddings
    assert embedding.tensor_name == "hidden" and list(embedding.tensor_shape) == [10, 8]
    with open(os.path.join(logger.run_path, embedding.metadata_path)) as handle:
        labels = handle.read().splitlines()
    assert labels == [str(v) for v in y[:10]]


def test_logger_embedding_from_a_callable(tmp_path, images):
    x, y = images

    def flat_pixels(samples):
        return samples.reshape(len(samples), -1)

    logger = Logger(tmp_path, scalars_every=0, histograms=False, embeddings=(flat_pixels, x[:4]))
    tiny_cnn().fit(x, y, batch_size=16, verbose=0, callbacks=[logger])
    (embedding,) = _config(logger.run_path).embeddings
    assert embedding.tensor_name == "flat_pixels" and list(embedding.tensor_shape) == [4, 64]


def test_logger_rejects_an_unknown_layer_before_training(tmp_path, images):
    x, y = images
    model = tiny_cnn()
    logger = Logger(tmp_path, scalars_every=0, histograms=False, embeddings=("nope", x[:4], y[:4]))
    with pytest.raises(ContractError, match="expected the name of a layer of 'tiny'"):
        model.fit(x, y, batch_size=16, verbose=0, callbacks=[logger])
    assert int(model.optimizer.iterations.numpy()) == 0
