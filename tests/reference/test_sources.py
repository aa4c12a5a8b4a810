"""The data-source registry, and the old import paths of the split modules."""

import importlib

import numpy as np
import pytest

from tfguard._errors import DataError
from tfguard.reference import _loaders
from tfguard.reference._sources import SOURCES, SPECS, find_source, load_spec

# `tfguard.reference._train` the module, not the function the package exports under that name.
config_module, data_module, train_module, dataset_module, sources_module = (
    importlib.import_module(f"tfguard.reference._{name}")
    for name in ("config", "data", "train", "dataset", "sources")
)
fashion_module = importlib.import_module("tfguard.reference._loaders.fashion_mnist")


def test_each_source_has_its_own_loader_module():
    modules = {source.name: source.load.__module__ for source in SOURCES}
    assert modules == {
        "digits": "tfguard.reference._loaders.digits",
        "fashion_mnist": "tfguard.reference._loaders.fashion_mnist",
        "npz": "tfguard.reference._loaders.npz",
        "dir": "tfguard.reference._loaders.image_dir",
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


def test_the_names_of_data_and_train_stay_importable_where_they_were(tmp_path, monkeypatch):
    homes = {
        _loaders: ("load_digits", "load_fashion_mnist", "load_npz", "load_image_dir", "fashion_mnist_dir"),
        dataset_module: ("DatasetInfo", "LoadedData", "TEST_FRACTION", "split_indices"),
        fashion_module: ("FASHION_MNIST_FILES", "FASHION_MNIST_CLASSES", "FASHION_MNIST_ORIGIN"),
        sources_module: ("SPECS",),
    }
    for home, names in homes.items():
        for name in names:
            assert getattr(data_module, name) is getattr(home, name), name
    named = {name for names in homes.values() for name in names}
    assert set(data_module.__all__) == named | {"load_data", "keras_home"}
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert data_module.keras_home() == tmp_path  # where the Fashion-MNIST files are looked for
    np.savez(tmp_path / "a.npz", x_train=np.zeros((10, 3), np.float32), y_train=np.arange(10) % 2)
    data = data_module.load_data(f"npz:{tmp_path / 'a.npz'}")
    assert isinstance(data, data_module.LoadedData) and data.info.input_shape == (3,)
    assert train_module.TrainConfig is config_module.TrainConfig
    assert train_module.load_config is config_module.load_config
