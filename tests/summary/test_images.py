"""Images: feature-map grids, inputs rescaled to [0, 1], and `images/inputs` written by the Logger."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf

from tests.summary.conftest import tiny_cnn
from tests.summary.readback import read_run
from tfguard import _tags
from tfguard._errors import ContractError
from tfguard.summary import Logger, feature_grid, unit_images


def test_feature_grid_tiles_channels():
    maps = np.zeros((4, 5, 6), np.float32)
    for c in range(6):
        maps[:, :, c] = np.arange(20).reshape(4, 5) * (c + 1)
    grid = feature_grid(maps)
    assert isinstance(grid, tf.Tensor) and grid.dtype == tf.float32
    # 6 channels -> 3 columns, 2 rows; 1 pixel of padding
    assert tuple(grid.shape) == (1, 2 * 5 - 1, 3 * 6 - 1, 1)
    g = grid.numpy()[0, :, :, 0]
    np.testing.assert_allclose(g[0:4, 0:5], np.arange(20).reshape(4, 5) / 19.0)
    assert (g[4, :] == 1.0).all() and (g[:, 5] == 1.0).all()
    assert g.min() >= 0.0 and g.max() <= 1.0


def test_feature_grid_accepts_a_batch_of_one_and_constant_maps():
    grid = feature_grid(np.ones((1, 3, 3, 4)), padding=0)
    assert tuple(grid.shape) == (1, 6, 6, 1)
    assert float(tf.reduce_max(grid)) == 0.0


@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3, 4), (3, 3, 3, 3, 1)])
def test_feature_grid_rejects_other_shapes(shape):
    with pytest.raises(ContractError, match=r"expected one feature map \[H, W, C\]"):
        feature_grid(np.zeros(shape))


def test_unit_images_rescale():
    standardized = np.random.default_rng(0).normal(size=(5, 6, 6, 3)).astype(np.float32)
    out = unit_images(standardized, 2)
    assert out.shape == (2, 6, 6, 3) and out.dtype == np.float32
    for sample in out:
        assert sample.min() == 0.0 and sample.max() == 1.0
    ints = unit_images(np.full((2, 5, 5), 51, np.uint8))
    assert ints.shape == (2, 5, 5, 1) and np.allclose(ints, 0.2)
    unit = np.random.default_rng(1).random((1, 4, 4, 1)).astype(np.float32)
    np.testing.assert_array_equal(unit_images(unit), unit)
    with pytest.raises(ContractError, match="expected images"):
        unit_images(np.zeros((4, 10)))


def _png_size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return image.size


def test_logger_writes_sample_inputs_of_the_first_batch(tmp_path, images):
    x, y = images
    logger = Logger(tmp_path, scalars_every=5, histograms=False)
    tiny_cnn().fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[logger])
    (point,) = read_run(logger.run_path)[_tags.IMAGES_INPUTS]
    assert point.plugin == "images" and point.step == 1
    width, height, *pngs = point.value
    assert (int(width), int(height), len(pngs)) == (8, 8, 3)
    assert _png_size(pngs[0]) == (8, 8)


def test_logger_writes_given_images_and_none_when_off(tmp_path, images):
    x, y = images
    given = Logger(tmp_path / "a", images=x[:2], scalars_every=0, histograms=False)
    off = Logger(tmp_path / "b", images=0, scalars_every=0, histograms=False)
    tiny_cnn().fit(x, y, batch_size=16, verbose=0, callbacks=[given, off])
    (point,) = read_run(given.run_path)[_tags.IMAGES_INPUTS]
    assert point.step == 0 and len(point.value) == 4
    assert _tags.IMAGES_INPUTS not in read_run(off.run_path)


def test_logger_peeks_explicitly_requested_samples_without_instrumentation(tmp_path, images):
    x, y = images
    logger = Logger(tmp_path, images=2, scalars_every=0, histograms=False)
    model = tiny_cnn()
    model.fit(x, y, batch_size=16, verbose=0, callbacks=[logger])
    (point,) = read_run(logger.run_path)[_tags.IMAGES_INPUTS]
    assert point.step == 1 and len(point.value) == 4
    assert len(model.history.history["loss"]) == 1
