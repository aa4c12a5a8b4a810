"""`lint`: every static check that applies to what it is given; `lint_saved_model`.

`lint` runs the model check when given a model, the pipeline check when given
a dataset, the input check when given inputs and the label check when given
labels and a model. Given a dataset but no `x`/`y`, it takes one batch from
the dataset (batching 256 elements itself when the pipeline does not batch)
and checks that batch's inputs and labels.

`lint_saved_model` is what `tfguard lint MODEL.keras` calls: it loads the
file with `safe_mode=True` (no arbitrary code runs) and checks the model
against the loss it was saved with.

Example:

>>> import keras, numpy as np, tensorflow as tf
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
>>> model.compile(loss="sparse_categorical_crossentropy")
>>> ds = tf.data.Dataset.from_tensor_slices((np.zeros((8, 4), "float32"), np.arange(8) % 3))
>>> [f.code for f in lint(model, dataset=ds.shuffle(8).batch(4).prefetch(1))]
[]
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import keras
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard._findings import Finding
from tfguard.lint._dataset import is_batched, lint_dataset
from tfguard.lint._dataset_graph import require_dataset
from tfguard.lint._inputs import lint_inputs
from tfguard.lint._labels import lint_labels
from tfguard.lint._model_lint import lint_model

#: How many elements `lint` batches itself from a pipeline that does not batch.
SAMPLE_SIZE = 256


def sample_batch(ds: tf.data.Dataset) -> tuple[Any, Any]:
    """Takes one batch `(x, y)` from a dataset, as `Model.fit` would unpack it.

    Args:
        ds: a `tf.data.Dataset` of `(x, y)`, `(x, y, sample_weight)` or `x`.

    Returns:
        `(x, y)` as numpy values (`y` is `None` when the elements have no
        labels); `(None, None)` for an empty dataset.

    Raises:
        TypeError: if `ds` is not a `tf.data.Dataset`.
    """
    require_dataset(ds)
    try:
        batched = is_batched(ds)
    except (tf.errors.OpError, ValueError):
        batched = True
    source = ds if batched else ds.batch(SAMPLE_SIZE)
    for element in source.take(1):
        element = tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, element)
        if isinstance(element, tuple) and len(element) in (2, 3):
            return element[0], element[1]
        if isinstance(element, tuple) and len(element) == 1:
            return element[0], None
        return element, None
    return None, None


def lint(
    model=None,
    x: Any = None,
    y: Any = None,
    dataset: tf.data.Dataset | None = None,
) -> list[Finding]:
    """Runs every static check that applies to the arguments given.

    Example:

    >>> import numpy as np
    >>> [f.code for f in lint(x=np.full((4, 8, 8), 200, dtype=np.uint8))]
    ['raw_pixels']

    Args:
        model: a Keras model (compiled or not). Defaults to `None`.
        x: one input batch. Defaults to `None` (taken from `dataset` when
            both `x` and `y` are `None`).
        y: the labels of that batch. Defaults to `None`.
        dataset: a `tf.data.Dataset` yielding `(x, y)`. Defaults to `None`.

    Returns:
        The findings: model, then pipeline, then inputs, then labels.

    Raises:
        ValueError: if nothing is given.
        TypeError: if an argument has the wrong type.
    """
    if model is None and x is None and y is None and dataset is None:
        raise ContractError(
            "Expected at least one of `model`, `x`, `y`, `dataset`. Received: all None"
        )
    if model is not None and not isinstance(model, keras.Model):
        raise ContractError(
            f"Received an invalid value for `model`, expected a keras.Model. "
            f"Received: model of type {type(model).__name__}"
        )
    findings: list[Finding] = []
    if model is not None:
        findings.extend(lint_model(model))
    from_dataset = False
    if dataset is not None:
        findings.extend(lint_dataset(dataset))
        if x is None and y is None:
            x, y = sample_batch(dataset)
            from_dataset = True
    try:
        if x is not None:
            findings.extend(lint_inputs(x, model))
        if y is not None and model is not None:
            findings.extend(lint_labels(y, model))
    except (TypeError, ValueError):
        if not from_dataset:
            raise
        # A batch whose structure the checks cannot read (strings, ragged,
        # nested dicts) is not an argument error of the caller: skip it.
    return findings


def lint_saved_model(path: str | os.PathLike) -> list[Finding]:
    """Loads a `.keras` model file safely and checks its activation against its loss.

    Example:

    >>> import keras, pathlib, tempfile
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    >>> model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "m.keras"
    >>> model.save(path)
    >>> [f.code for f in lint_saved_model(path)]
    ['softmax_with_from_logits']

    Args:
        path: a `.keras` file written by `model.save`.

    Returns:
        The findings of `lint_model` on the loaded model.

    Raises:
        ContractError: if the path does not exist, is not a `.keras` file, or
            cannot be loaded with `safe_mode=True` (e.g. it holds a `Lambda`).
    """
    path = os.fspath(path)
    if not path.endswith(".keras"):
        raise ContractError(
            f"Expected a model file ending in `.keras`. Received: path={path!r}",
            hint="save the model with model.save('model.keras'); SavedModel folders "
            "(model.export) hold no Keras layers to lint.",
        )
    if not os.path.isfile(path):
        raise ContractError(
            f"Expected an existing `.keras` file. Received: path={path!r}, which does not exist",
            hint="check the path (relative paths start from the current directory).",
        )
    try:
        with warnings.catch_warnings():
            # Restoring optimizer slots is irrelevant to a lint; Keras warns when
            # the saved optimizer was never built. The library stays silent.
            warnings.filterwarnings("ignore", message="Skipping variable loading for optimizer")
            model = keras.saving.load_model(path, safe_mode=True)
    except Exception as err:  # noqa: BLE001 - any load failure is reported the same way
        first_line = (str(err).splitlines() or [""])[0][:300]
        raise ContractError(
            f"Expected a `.keras` file that loads with safe_mode=True. Received: {path!r}, "
            f"which failed with {type(err).__name__}: {first_line}",
            hint="a Lambda layer or an unregistered custom object cannot load safely; "
            "register custom objects with @keras.saving.register_keras_serializable().",
        ) from err
    return lint_model(model)
