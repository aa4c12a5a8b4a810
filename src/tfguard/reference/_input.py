"""The `tf.data` input pipeline and the one preprocessing function.

`preprocess` maps raw inputs (as a user sends them, e.g. `uint8` pixels) to
the model's `float32` inputs in [0, 1]. Training maps it over the dataset and
`tfguard.reference.export_model` puts the very same function inside the
exported serving signature, so train/serve skew cannot happen.

`make_dataset` builds the pipeline in the order the `tf.data` performance
guide asks for:

    from_tensor_slices → map(preprocess, AUTOTUNE) → cache
        → shuffle (training only, before batch) → batch
        → map(augment, AUTOTUNE) (training only, after the cache) → prefetch(AUTOTUNE)

Example:

>>> import numpy as np
>>> from tfguard.reference import make_dataset
>>> x = np.zeros((10, 28, 28, 1), np.uint8); y = np.arange(10)
>>> ds = make_dataset(x, y, batch_size=4, training=True)
>>> [tuple(b[0].shape) for b in ds]
[(4, 28, 28, 1), (4, 28, 28, 1), (2, 28, 28, 1)]
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from tfguard._errors import ContractError

SHUFFLE_BUFFER_MAX = 10_000


def preprocess(x, value_range: Sequence[float] = (0, 255)) -> tf.Tensor:
    """Maps raw inputs to the model's `float32` inputs in [0, 1].

    `(float32(x) - low) / (high - low)`: for `uint8` pixels with the default
    range this is `x / 255`. Shared by training and the exported signature.

    Example:

    >>> preprocess(tf.constant([0, 51, 255], tf.uint8)).numpy().tolist()
    [0.0, 0.20000000298023224, 1.0]

    Args:
        x: raw inputs, any real dtype.
        value_range: `(low, high)` of the raw inputs. Defaults to `(0, 255)`.

    Returns:
        A `float32` tensor of the same shape.

    Raises:
        ContractError: `value_range` is not `(low, high)` with `low < high`.
    """
    low, high = _check_range(value_range)
    x = tf.cast(x, tf.float32)
    if low != 0.0:
        x = x - tf.constant(low, tf.float32)
    return x / tf.constant(high - low, tf.float32)


def _check_range(value_range) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value_range)
    except (TypeError, ValueError):
        low = high = None
    if low is None or not low < high:
        raise ContractError(
            "Received an invalid value for `value_range`, expected (low, high) with low < high. "
            f"Received: value_range={value_range!r}"
        )
    return low, high


def make_augmenter(
    input_shape: Sequence[int], *, flip: bool = False, pad: int = 2, seed: int = 0
) -> keras.Sequential:
    """Random augmentation as Keras preprocessing layers.

    A random crop of the image padded by `pad` pixels on each side (a shift
    of up to ±`pad` pixels), and a random horizontal flip when `flip`
    (only for data whose labels survive a flip: not digits).

    Args:
        input_shape: `(height, width, channels)`.
        flip: add `RandomFlip("horizontal")`. Defaults to `False`.
        pad: pixels of zero padding before the crop. Defaults to `2`.
        seed: seed of the random layers. Defaults to `0`.

    Returns:
        A `keras.Sequential` to call with `training=True` on a batch.

    Raises:
        ContractError: `input_shape` is not an image shape.
    """
    if len(input_shape) != 3:
        raise ContractError(
            "Received an invalid value for `input_shape`, expected (height, width, channels) "
            f"for image augmentation. Received: input_shape={tuple(input_shape)}",
            hint="turn augmentation off for non-image data.",
        )
    height, width = int(input_shape[0]), int(input_shape[1])
    layers = [
        keras.layers.ZeroPadding2D(pad),
        keras.layers.RandomCrop(height, width, seed=seed),
    ]
    if flip:
        layers.append(keras.layers.RandomFlip("horizontal", seed=seed + 1))
    return keras.Sequential(layers, name="augment")


def make_dataset(
    x: np.ndarray,
    y: np.ndarray,
    *,
    batch_size: int = 64,
    training: bool = False,
    value_range: Sequence[float] = (0, 255),
    augment: keras.Layer | None = None,
    seed: int = 0,
) -> tf.data.Dataset:
    """Builds a batched `tf.data.Dataset` of `(preprocess(x), y)`.

    Training datasets are shuffled (reshuffled each epoch, before batching)
    and augmented after the cache; evaluation datasets keep their order and
    are never augmented.

    Args:
        x: raw inputs `(N, ...)`.
        y: integer labels `(N,)`.
        batch_size: examples per batch. Defaults to `64`.
        training: shuffle and augment. Defaults to `False`.
        value_range: `(low, high)` of the raw inputs, passed to `preprocess`.
            Defaults to `(0, 255)`.
        augment: a layer applied to training batches, e.g. `make_augmenter(...)`,
            or `None`. Defaults to `None`.
        seed: shuffle seed. Defaults to `0`.

    Returns:
        A `tf.data.Dataset` yielding `(float32 inputs, labels)` batches.

    Raises:
        ContractError: `batch_size` is not a positive integer or `x` and `y`
            differ in length.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ContractError(
            "Received an invalid value for `batch_size`, expected a positive integer. "
            f"Received: batch_size={batch_size!r}"
        )
    if len(x) != len(y):
        raise ContractError(
            f"Received inputs and labels of different lengths, expected equal. "
            f"Received: len(x)={len(x)}, len(y)={len(y)}"
        )
    low, high = _check_range(value_range)

    def _prep(image, label):
        return preprocess(image, (low, high)), label

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.map(_prep, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.cache()
    if training:
        buffer = max(1, min(len(x), SHUFFLE_BUFFER_MAX))
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size)
    if training and augment is not None:

        def _augment(images, labels):
            return augment(images, training=True), labels

        ds = ds.map(_augment, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)
