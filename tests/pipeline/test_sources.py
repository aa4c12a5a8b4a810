"""The data-source registry, and the old import paths of the split modules."""

import importlib

import numpy as np
import pytest

from tfguard.errors import DataError
from tfguard.pipeline import loaders
from tfguard.pipeline.sources import SOURCES, SPECS, find_source, load_spec

# `tfguard.pipeline.train` the module, not the function the package exports under that name.
config_module, data_module, train_module = (
    importlib.import_module(f"tfguard.pipeline.{name}") for name in ("config", "data", "train")
)


def test_each_source_has_its_own_loader_module():
    modules = {source.name: source.load.__module__ for source in SOURCES}
    assert modules == {
        "digits": "tfguard.pipeline.loaders.digits",
        "fashion_mnist": "tfguard.pipeline.loaders.fashion_mnist",
        "npz": "tfguard.pipeline.loaders.npz",
        "dir": "tfguard.pipeline.loaders.image_dir",
    }
    assert SPECS == data_module.SPECS == ("digits", "fashion_mnist", "npz:PATH", "dir:PATH")


@pytest.mark.parametrize(
    ("spec", "name", "path"),
    [
        ("digits", "digits", None),
        ("fashion_mnist", "fashion_mnist", None),
        ("fashion-mnist", "fashion_mnist", None),
        ("npz:a/b.npz", "npz", "a/b.npz"),
        ("dir:C:/images", "dir", "C:/images"),
    ],
)
def test_a_spec_names_its_source_and_path(spec, name, path):
    source, got = find_source(spec)
    assert (source.name, got) == (name, path)


@pytest.mark.parametrize("spec", ["mnist", "npz", "npz:", "dir", "digits:x", "", None, 3])
def test_a_spec_without_a_source_says_what_is_expected(spec):
    with pytest.raises(DataError) as err:
        find_source(spec)
    assert err.value.message == (
        "Received an invalid value for `data`, expected one of digits, fashion_mnist, "
        f"npz:PATH, dir:PATH. Received: data={spec!r}"
    )
    assert "digits" in err.value.hint


def test_each_loader_gets_only_the_options_it_takes(tmp_path):
    path = tmp_path / "a.npz"
    np.savez(path, x_train=np.zeros((10, 3), np.float32), y_train=np.arange(10) % 2)
    data = load_spec(f"npz:{path}", image_size=(5, 5), color_mode="rgb")
    assert data.info.input_shape == (3,) and len(data.x_train) == 8
    dir_source, _ = find_source("dir:x")
    assert dir_source.options == ("image_size", "color_mode")


def test_the_names_of_data_and_train_stay_importable_where_they_were():
    for name in ("load_digits", "load_fashion_mnist", "load_npz", "load_image_dir",
                 "fashion_mnist_dir"):
        assert getattr(data_module, name) is getattr(loaders, name)
    for name in ("DatasetInfo", "LoadedData", "load_data", "keras_home", "FASHION_MNIST_FILES",
                 "FASHION_MNIST_CLASSES", "FASHION_MNIST_ORIGIN", "TEST_FRACTION",
                 "_is_keras_own_cache", "_split_indices", "_check_xy"):
        assert hasattr(data_module, name), name
    assert train_module.TrainConfig is config_module.TrainConfig
    assert train_module.load_config is config_module.load_config
