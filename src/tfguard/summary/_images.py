"""Images for TensorBoard: sample inputs rescaled to [0, 1], and feature-map grids.

TensorBoard shows float images in `[0, 1]`; model inputs are often
standardized (mean 0, std 1) or `uint8` in `[0, 255]`. `unit_images` turns a
batch into a few displayable samples without changing what they show (each
sample is min-max rescaled on its own, so a standardized image looks like the
original). `feature_grid` tiles the channels of one activation map into a
single grayscale image, the usual way to look at what a convolution learned.

Example:

>>> import numpy as np
>>> grid = feature_grid(np.random.rand(6, 6, 4))
>>> tuple(grid.shape)
(1, 13, 13, 1)
>>> unit_images(np.full((5, 8, 8), 255, np.uint8), 2).shape
(2, 8, 8, 1)
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from tfguard._errors import ContractError

IMAGE_CHANNELS = (1, 3, 4)
MIN_SIDE = 4  # smaller "images" are not worth a picture


def looks_like_images(shape) -> bool:
    """`True` for a batch shape `[n, h, w]` or `[n, h, w, c]` with `c` in 1, 3, 4.

    Example:

    >>> looks_like_images((64, 28, 28, 1)), looks_like_images((64, 10))
    (True, False)
    """
    shape = tuple(int(s) if s is not None else -1 for s in shape)
    if len(shape) == 3:
        return shape[1] >= MIN_SIDE and shape[2] >= MIN_SIDE
    if len(shape) == 4:
        return shape[1] >= MIN_SIDE and shape[2] >= MIN_SIDE and shape[3] in IMAGE_CHANNELS
    return False


def unit_images(batch, max_outputs: int = 3) -> np.ndarray:
    """The first `max_outputs` samples of an image batch as float32 `[k, h, w, c]` in [0, 1].

    `uint8` (and other integer) batches are divided by 255 (by their max if it
    is larger); float samples already within [0, 1] are kept; any other float
    sample is min-max rescaled on its own. Non-finite pixels become 0.

    Example:

    >>> x = np.array([[[-1.0, 1.0], [0.0, 3.0]]] * 4)[..., None].repeat(2, 1).repeat(2, 2)
    >>> y = unit_images(x, 1)
    >>> float(y.min()), float(y.max()), y.shape
    (0.0, 1.0, (1, 4, 4, 1))

    Args:
        batch: an array or tensor `[n, h, w]` or `[n, h, w, c]` with `c` in 1, 3, 4.
        max_outputs: how many samples to keep. Defaults to `3`.

    Returns:
        A float32 array in [0, 1].

    Raises:
        ContractError: if `batch` does not have an image shape.
    """
    array = np.asarray(batch)
    if not looks_like_images(array.shape):
        raise ContractError(
            "Received an invalid value for `batch`, expected images [n, h, w] or [n, h, w, c] "
            f"with c in {IMAGE_CHANNELS} and sides >= {MIN_SIDE}. Received: shape={array.shape}"
        )
    array = array[: max(1, int(max_outputs))]
    if array.ndim == 3:
        array = array[..., None]
    if array.dtype == np.bool_:
        return array.astype(np.float32)
    if np.issubdtype(array.dtype, np.integer):
        top = max(255.0, float(array.max())) if array.size else 255.0
        return np.clip(array.astype(np.float32) / top, 0.0, 1.0)
    x = array.astype(np.float32)
    x = np.where(np.isfinite(x), x, 0.0)
    out = np.empty_like(x)
    for index, sample in enumerate(x):
        low, high = float(sample.min()), float(sample.max())
        if low >= 0.0 and high <= 1.0:
            out[index] = sample
        elif high > low:
            out[index] = (sample - low) / (high - low)
        else:
            out[index] = 0.0
    return out


def feature_grid(feature_maps, *, padding: int = 1, pad_value: float = 1.0) -> tf.Tensor:
    """Tiles the channels of one feature map into a single grayscale image.

    Each channel is min-max rescaled to [0, 1] on its own (a constant channel
    is 0), laid out row by row in a near-square grid (`ceil(sqrt(C))`
    columns) with `padding` pixels of `pad_value` between tiles. The result
    goes straight into `tf.summary.image`.

    Example:

    >>> import numpy as np
    >>> tuple(feature_grid(np.zeros((1, 5, 7, 3)), padding=0).shape)
    (1, 10, 14, 1)

    Args:
        feature_maps: an array or tensor `[H, W, C]` or `[1, H, W, C]`.
        padding: pixels between tiles. Defaults to `1`.
        pad_value: the value of the padding, in [0, 1]. Defaults to `1.0`.

    Returns:
        A float32 tensor `[1, rows*(H+padding)-padding, cols*(W+padding)-padding, 1]`.

    Raises:
        ContractError: for any other shape, or a negative `padding`.
    """
    maps = np.asarray(feature_maps, dtype=np.float32)
    if maps.ndim == 4 and maps.shape[0] == 1:
        maps = maps[0]
    if maps.ndim != 3 or min(maps.shape) < 1:
        raise ContractError(
            "Received an invalid value for `feature_maps`, expected one feature map [H, W, C] "
            f"or [1, H, W, C]. Received: shape={np.shape(feature_maps)}"
        )
    if padding < 0:
        raise ContractError(
            f"Received an invalid value for `padding`, expected an integer >= 0. Received: padding={padding}"
        )
    height, width, channels = maps.shape
    maps = np.where(np.isfinite(maps), maps, 0.0)
    low = maps.min(axis=(0, 1), keepdims=True)
    high = maps.max(axis=(0, 1), keepdims=True)
    span = np.where(high > low, high - low, 1.0)
    maps = np.where(high > low, (maps - low) / span, 0.0)
    cols = math.ceil(math.sqrt(channels))
    rows = math.ceil(channels / cols)
    grid = np.full(
        (rows * (height + padding) - padding, cols * (width + padding) - padding),
        pad_value,
        dtype=np.float32,
    )
    for channel in range(channels):
        row, col = divmod(channel, cols)
        top, left = row * (height + padding), col * (width + padding)
        grid[top : top + height, left : left + width] = maps[:, :, channel]
    return tf.constant(grid[None, :, :, None])


__all__ = ["feature_grid", "looks_like_images", "unit_images"]
