"""An image folder with one sub-folder per class, read with Keras.

`load_image_dir` reads the folder with `keras.utils.image_dataset_from_directory`
(labels from the sub-folder names, in sorted order), resizes every image
(bilinear) and keeps it as `uint8` pixels 0..255. A folder holding `train/`
and `test/`, each with the class sub-folders, gives its own split; otherwise
the fixed stratified 80/20 split of `tfguard.reference._dataset.split_indices`
is made.

Example:

>>> import pathlib, tempfile
>>> import numpy as np
>>> import tensorflow as tf
>>> root = pathlib.Path(tempfile.mkdtemp()) / "shapes"
>>> for name in ("circle", "square"):
...     (root / name).mkdir(parents=True)
...     for i in range(5):
...         png = tf.io.encode_png(np.full((6, 6, 3), 50 * i, np.uint8)).numpy()
...         _ = (root / name / f"{i}.png").write_bytes(png)
>>> data = load_image_dir(root, image_size=(8, 8))
>>> data.info.class_names, data.x_train.shape, len(data.x_test)
(('circle', 'square'), (8, 8, 8, 1), 2)
"""

from __future__ import annotations

import os
from pathlib import Path

import keras
import numpy as np

from tfguard._errors import DataError
from tfguard.reference._dataset import DatasetInfo, LoadedData, split_indices

__all__ = ["load_image_dir"]


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
        train_idx, test_idx = split_indices(y)
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
