"""Fashion-MNIST from the files Keras caches, never downloaded.

`load_fashion_mnist` reads the four gzip idx files under
`$KERAS_HOME/datasets/fashion-mnist/` (`~/.keras` without `KERAS_HOME`, as
Keras's own `keras_home` names it). When that folder is the one Keras's own
loader looks in, `keras.datasets.fashion_mnist.load_data()` reads them (its
`get_file` finds the cached files and downloads nothing); when `KERAS_HOME`
changed after Keras was imported (Keras reads it once), the same files are
read with `tfguard.reference._idx.read_idx`. Without the files, a `DataError`
names them and the folder to put them in.

Example:

>>> fashion_mnist_dir().parts[-2:]
('datasets', 'fashion-mnist')
>>> len(FASHION_MNIST_CLASSES), FASHION_MNIST_CLASSES[9]
(10, 'Ankle boot')
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import keras
import numpy as np

from tfguard._errors import DataError
from tfguard._hooks.keras_compat import keras_home
from tfguard.reference._dataset import DatasetInfo, LoadedData
from tfguard.reference._idx import read_idx

__all__ = [
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_FILES",
    "FASHION_MNIST_ORIGIN",
    "fashion_mnist_dir",
    "load_fashion_mnist",
]

FASHION_MNIST_FILES = (
    "train-labels-idx1-ubyte.gz",
    "train-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
)
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
FASHION_MNIST_ORIGIN = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"


def fashion_mnist_dir() -> Path:
    """The folder Keras caches Fashion-MNIST in: `keras_home()/datasets/fashion-mnist`."""
    return keras_home() / "datasets" / "fashion-mnist"


def load_fashion_mnist() -> LoadedData:
    """Loads Fashion-MNIST from the Keras cache, without downloading.

    When the cache folder is the one Keras itself uses, this calls
    `keras.datasets.fashion_mnist.load_data()`: its `get_file` finds the
    cached files and does not download (Keras passes no file hash). When
    `KERAS_HOME` changed after Keras was imported (Keras reads it once), the
    same idx files are read here with the same logic.

    Returns:
        A `LoadedData` named `"fashion_mnist"`, 60,000 train and 10,000 test
        `uint8` images of shape 28×28×1.

    Raises:
        DataError: a file is missing (the message names the files and the
            folder), truncated or malformed.
    """
    folder = fashion_mnist_dir()
    missing = [f for f in FASHION_MNIST_FILES if not (folder / f).is_file()]
    if missing:
        raise DataError(
            f"Fashion-MNIST is not in the Keras cache: missing {', '.join(missing)} in "
            f"{folder}/. Expected the four files {', '.join(FASHION_MNIST_FILES)}; "
            "tfguard never downloads.",
            hint=f"copy the four .gz files (from {FASHION_MNIST_ORIGIN}) into {folder}/ "
            "(set KERAS_HOME to use another cache folder), or use --data digits offline.",
        )
    if _is_keras_own_cache(folder):
        (x_train, y_train), (x_test, y_test) = _keras_fashion_mnist(folder)
    else:
        y_train = read_idx(folder / FASHION_MNIST_FILES[0], ndim=1)
        x_train = read_idx(folder / FASHION_MNIST_FILES[1], ndim=3)
        y_test = read_idx(folder / FASHION_MNIST_FILES[2], ndim=1)
        x_test = read_idx(folder / FASHION_MNIST_FILES[3], ndim=3)
    for (x, y), which in (((x_train, y_train), "train"), ((x_test, y_test), "t10k")):
        if x.shape[1:] != (28, 28) or len(x) != len(y):
            raise DataError(
                f"Fashion-MNIST {which} files in {folder}/ do not match: images {x.shape}, "
                f"labels {y.shape}. Expected (N, 28, 28) images and (N,) labels.",
                hint="download the four files again.",
            )
        if y.size and int(y.max()) >= 10:
            raise DataError(
                f"Fashion-MNIST {which} labels in {folder}/ go up to {int(y.max())}, expected 0..9.",
                hint="the label and image files may be swapped.",
            )
    info = DatasetInfo(
        name="fashion_mnist",
        spec="fashion_mnist",
        input_shape=(28, 28, 1),
        num_classes=10,
        dtype="uint8",
        value_range=(0, 255),
        class_names=FASHION_MNIST_CLASSES,
        hflip_safe=True,
    )
    return LoadedData(
        x_train[..., None].copy(),
        y_train.astype(np.int32),
        x_test[..., None].copy(),
        y_test.astype(np.int32),
        info,
    )


def _is_keras_own_cache(folder: Path) -> bool:
    """Whether Keras's own loader looks in `folder` (Keras read `KERAS_HOME` at its import)."""
    keras_dir = keras_home(at_import=True) / "datasets" / "fashion-mnist"
    return os.access(keras_dir.parent.parent, os.W_OK) and keras_dir.resolve() == folder.resolve()


def _keras_fashion_mnist(folder: Path):
    """Keras's own loader; its errors on a malformed file become a `DataError`."""
    try:
        return keras.datasets.fashion_mnist.load_data()
    except (ValueError, OSError, EOFError, zlib.error):
        for name, ndim in zip(FASHION_MNIST_FILES, (1, 3, 1, 3), strict=True):
            read_idx(folder / name, ndim=ndim)  # raises the precise DataError
        raise
