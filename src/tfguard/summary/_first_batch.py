"""What the first batch of a run shows: sample input images and the static lint of the batch.

The Logger peeks at the first batch once (through the train function
wrapper, `tfguard.summary._lifecycle`) and writes what `peek_first_batch`
returns at its first record: up to `count` inputs as images when the batch
looks like images, and the lint of the model against that batch.

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((4, 4, 1)), keras.layers.Flatten(), keras.layers.Dense(2)])
>>> batch = (np.random.rand(8, 4, 4, 1).astype("float32"), np.zeros(8, "int64"))
>>> lint, images = peek_first_batch(model, batch, images=2, lint=False)
>>> lint is None, images.shape
(True, (2, 4, 4, 1))
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfguard._hooks import keras_compat
from tfguard.summary import _runinfo
from tfguard.summary._images import looks_like_images, unit_images


def peek_first_batch(model, data, *, images: int, lint: bool, extra_lint=()) -> tuple:
    """`(lint JSON or None, [n, h, w, c] images in [0, 1] or None)` of a run's first batch.

    Args:
        model: the model being trained.
        data: the batch as the train function gets it (`(x, y[, sample_weight])`).
        images: how many inputs to keep as images (`0`: none).
        lint: whether to lint the model against the batch.
        extra_lint: static findings to add to that lint (the input pipeline's).
    """
    x, y, _ = keras_compat.unpack(data)
    text = _runinfo.lint_json(model, x, y, extra=list(extra_lint)) if lint else None
    first = tf.nest.flatten(x)[0] if x is not None else None
    if not images or not isinstance(first, (tf.Tensor, np.ndarray)) or not looks_like_images(first.shape):
        return text, None
    sample = first[:images]
    return text, unit_images(sample.numpy() if isinstance(sample, tf.Tensor) else sample, images)


__all__ = ["peek_first_batch"]
