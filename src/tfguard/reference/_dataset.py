"""What every data loader returns: raw arrays and the input contract they meet.

`LoadedData` holds raw train and test arrays exactly as a user would send
them to the exported model, with integer labels; `DatasetInfo` names their
input contract (shape, dtype, value range, class names), which travels with
the exported model. `split_indices` is the one fixed train/test split the
loaders make when a source has no test split of its own.

Example:

>>> import numpy as np
>>> info = DatasetInfo("toy", "npz:toy.npz", (2,), 2, "float32", (0.0, 1.0), ("a", "b"))
>>> data = LoadedData(np.zeros((10, 2)), np.arange(10) % 2, np.zeros((4, 2)), np.zeros(4), info)
>>> len(data.limited(3).x_train), info.to_dict()["input_shape"]
(3, [2])
>>> [len(part) for part in split_indices(np.arange(10) % 2)]
[8, 2]
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfguard._errors import DataError
from tfguard.reference._extras import road_module

__all__ = ["TEST_FRACTION", "DatasetInfo", "LoadedData", "split_indices"]

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


def split_indices(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A fixed (seed 0) stratified train/test split of `TEST_FRACTION`.

    A class with a single example cannot be stratified: the split is then
    made without stratification (still seed 0).

    Args:
        y: integer labels `(N,)`.

    Returns:
        `(train_indices, test_indices)`, each sorted.
    """
    train_test_split = road_module("sklearn.model_selection", "The train/test split of the reference road").train_test_split
    idx = np.arange(len(y))
    try:
        train, test = train_test_split(idx, test_size=TEST_FRACTION, stratify=y, random_state=0)
    except ValueError:  # a class with a single example
        train, test = train_test_split(idx, test_size=TEST_FRACTION, random_state=0)
    return np.sort(train), np.sort(test)
