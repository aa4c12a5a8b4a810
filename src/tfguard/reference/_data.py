"""Reference data: `load_data(spec)` gives raw numpy arrays and a `DatasetInfo`.

Every loader returns raw inputs exactly as a user would send them to the
exported model (for images: `uint8` pixels 0..255 in NHWC), integer labels,
and a `DatasetInfo` naming the input contract (shape, dtype, value range,
class names). Normalization is not done here: `tfguard.reference.preprocess`
is the one function that does it, in training and inside the export.

This module is the entry point; the parts live apart, each with one job:
the returned types in `tfguard.reference._dataset`, one loader per source in
`tfguard.reference._loaders`, and the spec → loader registry in
`tfguard.reference._sources`. Their names stay importable from here.

Specs understood by `load_data`:

- `"digits"` (offline default): scikit-learn's `load_digits`, 1,797 real 8×8
  handwritten digits (values 0..16), scaled to 0..255 and resized to the
  reference CNN's 28×28×1 with `tf.image.resize` (bilinear, deterministic);
  a fixed stratified 80/20 train/test split.
- `"fashion_mnist"`: the four idx files Keras caches under
  `$KERAS_HOME/datasets/fashion-mnist/` (`~/.keras` without `KERAS_HOME`).
  Nothing is downloaded: without the files, a `DataError` names them and the
  folder to put them in.
- `"npz:PATH"`: arrays `x_train`, `y_train` and optionally `x_test`,
  `y_test`, `class_names`, loaded with `allow_pickle=False`.
- `"dir:PATH"`: an image folder with one sub-folder per class (or `train/`
  and `test/` folders that each hold one sub-folder per class), read with
  `keras.utils.image_dataset_from_directory`.

Example:

>>> from tfguard.reference import load_data
>>> data = load_data("digits", limit=100)
>>> data.x_train.shape, data.x_train.dtype.name, data.info.value_range
((100, 28, 28, 1), 'uint8', (0, 255))
"""

from __future__ import annotations

from tfguard._hooks.keras_compat import keras_home
from tfguard.reference._dataset import TEST_FRACTION, DatasetInfo, LoadedData, split_indices
from tfguard.reference._loaders.digits import load_digits
from tfguard.reference._loaders.fashion_mnist import (
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_FILES,
    FASHION_MNIST_ORIGIN,
    fashion_mnist_dir,
    load_fashion_mnist,
)
from tfguard.reference._loaders.fashion_mnist import _is_keras_own_cache as _is_keras_own_cache
from tfguard.reference._loaders.fashion_mnist import _keras_fashion_mnist as _keras_fashion_mnist
from tfguard.reference._loaders.image_dir import _read_image_dir as _read_image_dir
from tfguard.reference._loaders.image_dir import load_image_dir
from tfguard.reference._loaders.npz import _check_xy as _check_xy
from tfguard.reference._loaders.npz import _raw_dtype_and_range as _raw_dtype_and_range
from tfguard.reference._loaders.npz import load_npz
from tfguard.reference._sources import SPECS, load_spec

__all__ = [
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_FILES",
    "FASHION_MNIST_ORIGIN",
    "SPECS",
    "TEST_FRACTION",
    "DatasetInfo",
    "LoadedData",
    "fashion_mnist_dir",
    "keras_home",
    "load_data",
    "load_digits",
    "load_fashion_mnist",
    "load_image_dir",
    "load_npz",
    "split_indices",
]

_split_indices = split_indices  # its name before the split into loaders


def load_data(
    spec: str = "digits",
    *,
    limit: int | None = None,
    seed: int = 0,
    image_size: tuple[int, int] = (28, 28),
    color_mode: str = "grayscale",
) -> LoadedData:
    """Loads a dataset by spec, offline.

    The spec names a source of `tfguard.reference._sources.SOURCES`; its
    loader reads the whole source, then `limit` picks a deterministic subset.

    Args:
        spec: `"digits"`, `"fashion_mnist"`, `"npz:PATH"` or `"dir:PATH"`.
            Defaults to `"digits"`.
        limit: cap on the number of train and of test examples (a
            deterministic subset), or `None`. Defaults to `None`.
        seed: seed of that subset. Defaults to `0`.
        image_size: `(height, width)` images of a `dir:` dataset are resized
            to. Defaults to `(28, 28)`.
        color_mode: `"grayscale"`, `"rgb"` or `"rgba"` for a `dir:` dataset.
            Defaults to `"grayscale"`.

    Returns:
        A `LoadedData`.

    Raises:
        DataError: the spec is unknown or the data is missing or malformed.
    """
    data = load_spec(spec, image_size=image_size, color_mode=color_mode)
    return data.limited(limit, seed=seed)
