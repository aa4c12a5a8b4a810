"""Reference data loaders: numpy arrays plus a small `DatasetInfo`.

Every loader returns raw inputs exactly as a user would send them to the
exported model (for images: `uint8` pixels 0..255 in NHWC), integer labels,
and a `DatasetInfo` naming the input contract (shape, dtype, value range,
class names). Normalization is not done here: `tfguard.pipeline.preprocess`
is the one function that does it, in training and inside the export.

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

>>> from tfguard.pipeline import load_data
>>> data = load_data("digits", limit=100)
>>> data.x_train.shape, data.x_train.dtype.name, data.info.value_range
((100, 28, 28, 1), 'uint8', (0, 255))
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from tfguard.errors import DataError
from tfguard.hooks import keras_compat
from tfguard.pipeline.idx import read_idx

SPECS = ("digits", "fashion_mnist", "npz:PATH", "dir:PATH")

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
TEST_FRACTION = 0.2


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """What a dataset's raw inputs look like: the input contract of a model.

    Args:
        name: short name used in run directory names, e.g. `"digits"`.
        spec: the spec it was loaded from, e.g. `"npz:/data/x.npz"`.
        input_shape: one example's shape, e.g. `(28, 28, 1)`.
        num_classes: the number of classes.
        dtype: dtype of the raw inputs, `"uint8"` or `"float32"`.
        value_range: `(low, high)` that raw inputs must lie in.
        class_names: one name per class.
        hflip_safe: whether a horizontal flip keeps the label (used by
            augmentation). Defaults to `False`.
    """

    name: str
    spec: str
    input_shape: tuple[int, ...]
    num_classes: int
    dtype: str
    value_range: tuple[float, float]
    class_names: tuple[str, ...]
    hflip_safe: bool = False

    def to_dict(self) -> dict:
        """Returns a JSON-ready dict (tuples become lists)."""
        d = dataclasses.asdict(self)
        d["input_shape"] = list(self.input_shape)
        d["value_range"] = list(self.value_range)
        d["class_names"] = list(self.class_names)
        return d


@dataclasses.dataclass
class LoadedData:
    """Raw train and test arrays with their `DatasetInfo`.

    Args:
        x_train: raw training inputs, `(N, *info.input_shape)`.
        y_train: integer labels `(N,)`, `int32`.
        x_test: raw held-out inputs.
        y_test: integer held-out labels.
        info: the dataset's description.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    info: DatasetInfo

    def limited(self, limit: int | None, *, seed: int = 0) -> LoadedData:
        """Returns at most `limit` train and `limit` test examples.

        The examples are a deterministic random subset (in their original
        order), so a small limit still covers every class.

        Args:
            limit: the cap per split, or `None` for everything. Defaults to `None`.
            seed: seed of the subset. Defaults to `0`.

        Returns:
            A new `LoadedData`.

        Raises:
            DataError: `limit` is not a positive integer.
        """
        if limit is None:
            return self
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise DataError(
                "Received an invalid value for `limit`, expected a positive integer or None. "
                f"Received: limit={limit!r}"
            )
        rng = np.random.default_rng(seed)

        def pick(x, y):
            if len(x) <= limit:
                return x, y
            idx = np.sort(rng.permutation(len(x))[:limit])
            return x[idx], y[idx]

        x_train, y_train = pick(self.x_train, self.y_train)
        x_test, y_test = pick(self.x_test, self.y_test)
        return LoadedData(x_train, y_train, x_test, y_test, self.info)


def load_data(
    spec: str = "digits",
    *,
    limit: int | None = None,
    seed: int = 0,
    image_size: tuple[int, int] = (28, 28),
    color_mode: str = "grayscale",
) -> LoadedData:
    """Loads a dataset by spec, offline.

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
    if not isinstance(spec, str) or not spec:
        raise DataError(
            f"Received an invalid value for `data`, expected one of {', '.join(SPECS)}. "
            f"Received: data={spec!r}"
        )
    kind, _, arg = spec.partition(":")
    if kind == "digits" and not arg:
        data = load_digits()
    elif kind in ("fashion_mnist", "fashion-mnist") and not arg:
        data = load_fashion_mnist()
    elif kind == "npz" and arg:
        data = load_npz(arg)
    elif kind == "dir" and arg:
        data = load_image_dir(arg, image_size=image_size, color_mode=color_mode)
    else:
        raise DataError(
            f"Received an invalid value for `data`, expected one of {', '.join(SPECS)}. "
            f"Received: data={spec!r}",
            hint="use 'digits' offline, or 'npz:path/to/file.npz' for your own arrays.",
        )
    return data.limited(limit, seed=seed)


# -- digits -----------------------------------------------------------------------


def load_digits() -> LoadedData:
    """Loads scikit-learn's handwritten digits as 28×28×1 `uint8` images.

    The 8×8 images (values 0..16) are scaled to 0..255, resized to 28×28 with
    `tf.image.resize` (bilinear), rounded and clipped to `uint8`. The split
    is a fixed stratified 80/20 split (1,437 train, 360 test).

    Returns:
        A `LoadedData` named `"digits"`.
    """
    import tensorflow as tf
    from sklearn import datasets

    digits = datasets.load_digits()
    images = digits.images.astype(np.float32)[..., None] * (255.0 / 16.0)
    resized = tf.image.resize(images, (28, 28), method="bilinear").numpy()
    x = np.clip(np.round(resized), 0, 255).astype(np.uint8)
    y = digits.target.astype(np.int32)
    train_idx, test_idx = _split_indices(y)
    info = DatasetInfo(
        name="digits",
        spec="digits",
        input_shape=(28, 28, 1),
        num_classes=10,
        dtype="uint8",
        value_range=(0, 255),
        class_names=tuple(str(i) for i in range(10)),
        hflip_safe=False,
    )
    return LoadedData(x[train_idx], y[train_idx], x[test_idx], y[test_idx], info)


def _split_indices(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A fixed (seed 0) stratified split, falling back to unstratified."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    try:
        train, test = train_test_split(idx, test_size=TEST_FRACTION, stratify=y, random_state=0)
    except ValueError:  # a class with a single example
        train, test = train_test_split(idx, test_size=TEST_FRACTION, random_state=0)
    return np.sort(train), np.sort(test)


# -- Fashion-MNIST ----------------------------------------------------------------


def keras_home() -> Path:
    """The Keras cache folder, as Keras's own helper names it (`keras_compat.keras_home`)."""
    return keras_compat.keras_home()


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
    keras_dir = keras_compat.keras_home(at_import=True) / "datasets" / "fashion-mnist"
    return os.access(keras_dir.parent.parent, os.W_OK) and keras_dir.resolve() == folder.resolve()


def _keras_fashion_mnist(folder: Path):
    """Keras's own loader; its errors on a malformed file become a `DataError`."""
    import zlib

    import keras

    try:
        return keras.datasets.fashion_mnist.load_data()
    except (ValueError, OSError, EOFError, zlib.error):
        for name, ndim in zip(FASHION_MNIST_FILES, (1, 3, 1, 3), strict=True):
            read_idx(folder / name, ndim=ndim)  # raises the precise DataError
        raise


# -- npz ----------------------------------------------------------------------------


def load_npz(path: str | os.PathLike) -> LoadedData:
    """Loads `x_train`, `y_train` (and `x_test`, `y_test`) from a `.npz` file.

    Images of shape `(N, H, W)` get a channel axis. Integer inputs within
    0..255 become `uint8` with range `(0, 255)`; other inputs become
    `float32` with range `(0, 1)` when they lie in it, `(0, 255)` when they
    lie in that, else the observed `(floor(min), ceil(max))`. Without
    `x_test`/`y_test`, a fixed stratified 80/20 split is made. An optional
    `class_names` string array names the classes.

    Args:
        path: the `.npz` file.

    Returns:
        A `LoadedData` named after the file.

    Raises:
        DataError: the file is missing, holds pickled objects, lacks an
            array, or the arrays do not fit together.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(
            f"The npz file {str(path)!r} does not exist.",
            hint="pass --data npz:PATH with the path to a file saved by numpy.savez.",
        )
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except ValueError as e:
        raise DataError(
            f"Could not load {str(path)!r} with allow_pickle=False: {e}. Expected plain "
            "numeric arrays.",
            hint="save numeric arrays (not Python objects) with numpy.savez.",
        ) from e
    except (OSError, EOFError) as e:
        raise DataError(f"Could not read the npz file {str(path)!r}: {e}.") from e
    missing = [k for k in ("x_train", "y_train") if k not in arrays]
    if ("x_test" in arrays) != ("y_test" in arrays):
        missing.append("y_test" if "x_test" in arrays else "x_test")
    if missing:
        raise DataError(
            f"The npz file {str(path)!r} lacks the array(s) {', '.join(missing)}. Expected "
            "x_train, y_train and optionally x_test with y_test. "
            f"Received: arrays={sorted(arrays)}",
            hint="save with numpy.savez(path, x_train=..., y_train=..., x_test=..., y_test=...).",
        )
    x_train, y_train = _check_xy(arrays["x_train"], arrays["y_train"], "train", path)
    if "x_test" in arrays:
        x_test, y_test = _check_xy(arrays["x_test"], arrays["y_test"], "test", path)
        if x_test.shape[1:] != x_train.shape[1:]:
            raise DataError(
                f"x_test in {str(path)!r} has example shape {x_test.shape[1:]}, expected the "
                f"shape of x_train, {x_train.shape[1:]}."
            )
    else:
        train_idx, test_idx = _split_indices(y_train)
        x_test, y_test = x_train[test_idx], y_train[test_idx]
        x_train, y_train = x_train[train_idx], y_train[train_idx]
    x_train, x_test, dtype, value_range = _raw_dtype_and_range(x_train, x_test, path)
    class_names = None
    if "class_names" in arrays:
        class_names = tuple(str(c) for c in np.asarray(arrays["class_names"]).reshape(-1))
    num_classes = int(max(y_train.max(initial=0), y_test.max(initial=0))) + 1
    if class_names is not None:
        if len(class_names) < num_classes:
            raise DataError(
                f"{str(path)!r} has labels up to {num_classes - 1} but only "
                f"{len(class_names)} class_names."
            )
        num_classes = len(class_names)
    info = DatasetInfo(
        name=f"npz-{path.stem}",
        spec=f"npz:{path.resolve()}",
        input_shape=tuple(int(d) for d in x_train.shape[1:]),
        num_classes=num_classes,
        dtype=dtype,
        value_range=value_range,
        class_names=class_names or tuple(str(i) for i in range(num_classes)),
    )
    return LoadedData(x_train, y_train, x_test, y_test, info)


def _check_xy(x: np.ndarray, y: np.ndarray, split: str, path: Path):
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim < 2 or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
        raise DataError(
            f"x_{split} in {str(path)!r} must be a numeric array of shape (N, ...). "
            f"Received: shape={x.shape}, dtype={x.dtype}"
        )
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise DataError(
            f"y_{split} in {str(path)!r} must hold integer class ids of shape (N,). "
            f"Received: shape={y.shape}, dtype={y.dtype}",
            hint="convert one-hot labels with y.argmax(-1).",
        )
    if len(x) != len(y):
        raise DataError(
            f"x_{split} and y_{split} in {str(path)!r} differ in length: {len(x)} vs {len(y)}."
        )
    if y.size and y.min() < 0:
        raise DataError(
            f"y_{split} in {str(path)!r} has negative labels, expected class ids 0..K-1. "
            f"Received: min={int(y.min())}"
        )
    return x, y.astype(np.int32)


def _raw_dtype_and_range(x_train, x_test, path):
    both = np.concatenate([x_train.reshape(-1), x_test.reshape(-1)])
    if both.size == 0:
        raise DataError(f"The npz file {str(path)!r} holds no examples.")
    if np.issubdtype(both.dtype, np.floating) and not np.isfinite(both).all():
        raise DataError(
            f"The inputs in {str(path)!r} hold {int((~np.isfinite(both)).sum())} NaN or Inf values.",
            hint="clean the data before training.",
        )
    lo, hi = float(both.min()), float(both.max())
    is_int = np.issubdtype(both.dtype, np.integer) or both.dtype == bool
    if is_int and lo >= 0 and hi <= 255:
        return x_train.astype(np.uint8), x_test.astype(np.uint8), "uint8", (0, 255)
    if lo >= 0 and hi <= 1:
        value_range = (0.0, 1.0)
    elif lo >= 0 and hi <= 255:
        value_range = (0.0, 255.0)
    else:
        value_range = (float(np.floor(lo)), float(np.ceil(hi)))
        if value_range[0] == value_range[1]:
            value_range = (value_range[0], value_range[0] + 1.0)
    return x_train.astype(np.float32), x_test.astype(np.float32), "float32", value_range


# -- image folder ---------------------------------------------------------------------


def load_image_dir(
    path: str | os.PathLike,
    *,
    image_size: tuple[int, int] = (28, 28),
    color_mode: str = "grayscale",
) -> LoadedData:
    """Loads an image folder with one sub-folder per class.

    With `train/` and `test/` sub-folders that each hold the class folders,
    they are the split; otherwise a fixed stratified 80/20 split is made.
    Images are resized (bilinear) and stored as `uint8`.

    Args:
        path: the folder.
        image_size: `(height, width)`. Defaults to `(28, 28)`.
        color_mode: `"grayscale"`, `"rgb"` or `"rgba"`. Defaults to `"grayscale"`.

    Returns:
        A `LoadedData` named after the folder.

    Raises:
        DataError: the folder is missing or holds no images.
    """
    path = Path(path).expanduser()
    if not path.is_dir():
        raise DataError(
            f"The image folder {str(path)!r} does not exist.",
            hint="pass --data dir:PATH with one sub-folder of images per class.",
        )
    if (path / "train").is_dir() and (path / "test").is_dir():
        x_train, y_train, names = _read_image_dir(path / "train", image_size, color_mode)
        x_test, y_test, test_names = _read_image_dir(path / "test", image_size, color_mode)
        if test_names != names:
            raise DataError(
                f"{str(path / 'test')!r} has classes {test_names}, expected the classes of "
                f"train/, {names}."
            )
    else:
        x, y, names = _read_image_dir(path, image_size, color_mode)
        train_idx, test_idx = _split_indices(y)
        x_train, y_train, x_test, y_test = x[train_idx], y[train_idx], x[test_idx], y[test_idx]
    info = DatasetInfo(
        name=f"dir-{path.name}",
        spec=f"dir:{path.resolve()}",
        input_shape=tuple(int(d) for d in x_train.shape[1:]),
        num_classes=len(names),
        dtype="uint8",
        value_range=(0, 255),
        class_names=tuple(names),
    )
    return LoadedData(x_train, y_train, x_test, y_test, info)


def _read_image_dir(path: Path, image_size, color_mode):
    import keras

    try:
        ds = keras.utils.image_dataset_from_directory(
            str(path),
            labels="inferred",
            label_mode="int",
            color_mode=color_mode,
            batch_size=None,
            image_size=tuple(image_size),
            shuffle=False,
            verbose=False,
        )
    except ValueError as e:
        raise DataError(
            f"Could not read images from {str(path)!r}: {e}",
            hint="put .png/.jpg/.bmp/.gif files in one sub-folder per class.",
        ) from e
    xs, ys = [], []
    for image, label in ds.as_numpy_iterator():
        xs.append(image)
        ys.append(label)
    if not xs:
        raise DataError(f"The image folder {str(path)!r} holds no images.")
    x = np.clip(np.round(np.stack(xs)), 0, 255).astype(np.uint8)
    return x, np.asarray(ys, np.int32), list(ds.class_names)
