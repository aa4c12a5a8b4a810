"""The values a run holds per step, besides scalars: histogram points and images.

Scalars are kept as three parallel numpy arrays per tag (see `Run`); the kinds
below carry more than one number per step, so each step is one small record.

Example:

>>> import numpy as np
>>> point = HistogramPoint(step=3, wall_time=1.5, buckets=np.array([[0.0, 1.0, 4.0]]))
>>> point.buckets[:, 2].sum()
np.float64(4.0)
>>> ImageInfo(step=3, wall_time=1.5, width=28, height=28, size_bytes=412).data is None
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["HistogramPoint", "ImageInfo"]


@dataclass(frozen=True)
class HistogramPoint:
    """One histogram of one tag at one step.

    Args:
        step: the global step.
        wall_time: seconds since the epoch when it was written.
        buckets: float64 array of shape `[k, 3]`, one row per bucket:
            left edge, right edge, count.
    """

    step: int
    wall_time: float
    buckets: np.ndarray


@dataclass(frozen=True)
class ImageInfo:
    """One image of one tag at one step: its size, and its bytes when asked for.

    A TF2 image summary may hold several images per step (`max_outputs`); each
    becomes one `ImageInfo`, in the order written.

    Args:
        step: the global step.
        wall_time: seconds since the epoch when it was written.
        width: width in pixels, as recorded by the writer.
        height: height in pixels, as recorded by the writer.
        size_bytes: length of the encoded (usually PNG) image.
        data: the encoded image, only when read with `load_images=True`.
            Defaults to `None`.
    """

    step: int
    wall_time: float
    width: int
    height: int
    size_bytes: int
    data: bytes | None = None
