"""Your own arrays: `x_train`, `y_train` (and `x_test`, `y_test`) of a `.npz` file.

`load_npz` loads the file with `allow_pickle=False`, gives `(N, H, W)`
images a channel axis, takes one-column labels as class ids, and decides
the raw dtype and value range the exported model will accept: integer
inputs within 0..255 become `uint8` in `(0, 255)`; other inputs become
`float32` in `(0, 1)` or `(0, 255)` when they lie in it, else in their
observed `(floor(min), ceil(max))`. Without `x_test`/`y_test`, the fixed
stratified 80/20 split of `tfguard.reference._dataset.split_indices` is made.

Example:

>>> import numpy as np, pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "mine.npz"
>>> np.savez(path, x_train=np.zeros((10, 4, 4), np.uint8), y_train=np.arange(10) % 2)
>>> data = load_npz(path)
>>> data.info.name, data.x_train.shape, data.info.dtype, data.info.value_range
('npz-mine', (8, 4, 4, 1), 'uint8', (0, 255))
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tfguard._errors import DataError
from tfguard.reference._dataset import DatasetInfo, LoadedData, split_indices

__all__ = ["load_npz"]


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
        train_idx, test_idx = split_indices(y_train)
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
