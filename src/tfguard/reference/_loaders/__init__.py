"""One loader per data source; `tfguard.reference._sources` maps a spec to one.

Each module reads one kind of source, offline, into a
`tfguard.reference._dataset.LoadedData` of raw inputs (no normalization):

- `digits`: scikit-learn's real 8×8 handwritten digits, resized to 28×28×1.
- `fashion_mnist`: the idx files Keras caches, never downloaded.
- `npz`: the arrays of a `numpy.savez` file.
- `image_dir`: an image folder with one sub-folder per class.

Example:

>>> from tfguard.reference._loaders import load_digits
>>> load_digits().info.input_shape
(28, 28, 1)
"""

from tfguard.reference._loaders.digits import load_digits
from tfguard.reference._loaders.fashion_mnist import fashion_mnist_dir, load_fashion_mnist
from tfguard.reference._loaders.image_dir import load_image_dir
from tfguard.reference._loaders.npz import load_npz

__all__ = ["fashion_mnist_dir", "load_digits", "load_fashion_mnist", "load_image_dir", "load_npz"]
