"""The offline default: scikit-learn's real handwritten digits as 28×28×1 images.

`load_digits` reads the 1,797 8×8 digits scikit-learn ships (values 0..16),
scales them to 0..255 and resizes them to the reference CNN's 28×28×1 with
`tf.image.resize` (bilinear, deterministic); the split is the fixed
stratified 80/20 one of `tfguard.reference._dataset.split_indices`.

Example:

>>> data = load_digits()
>>> data.x_train.shape, data.x_test.shape, data.x_train.dtype.name, int(data.x_train.max())
((1437, 28, 28, 1), (360, 28, 28, 1), 'uint8', 255)
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfguard.reference._dataset import DatasetInfo, LoadedData, split_indices
from tfguard.reference._extras import road_module

__all__ = ["load_digits"]


def load_digits() -> LoadedData:
    """Loads scikit-learn's handwritten digits as 28×28×1 `uint8` images.

    The 8×8 images (values 0..16) are scaled to 0..255, resized to 28×28 with
    `tf.image.resize` (bilinear), rounded and clipped to `uint8`. The split
    is a fixed stratified 80/20 split (1,437 train, 360 test).

    Returns:
        A `LoadedData` named `"digits"`.
    """
    digits = road_module("sklearn.datasets", "The digits data set (the reference road's offline default)").load_digits()
    images = digits.images.astype(np.float32)[..., None] * (255.0 / 16.0)
    resized = tf.image.resize(images, (28, 28), method="bilinear").numpy()
    x = np.clip(np.round(resized), 0, 255).astype(np.uint8)
    y = digits.target.astype(np.int32)
    train_idx, test_idx = split_indices(y)
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
