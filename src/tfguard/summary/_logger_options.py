"""The Logger's own arguments, checked: schedules, histogram kinds, samples, the log directory.

Keras's `TensorBoard` arguments are read by `tfguard.summary._keras_args`;
these are the checks of tfguard's own, each failing with what was received
and what was expected.

Example:

>>> check_every("scalars_every", 10), histogram_kinds(["weights"]), histogram_kinds(True)
(10, ('weights',), ('weights', 'gradients', 'activations'))
>>> check_every("scalars_every", -1)
Traceback (most recent call last):
...
tfguard._errors.ContractError: Received an invalid value for `scalars_every`, expected an integer >= 0 (0 = never). Received: scalars_every=-1
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from tfguard._errors import ContractError

HISTOGRAM_KINDS = ("weights", "gradients", "activations")
DEFAULT_IMAGES = 3
"""Sample images of the first batch written when the batch looks like images."""


def check_every(name: str, value) -> int:
    """A schedule or a count: an integer >= 0 (0 = never).

    Raises:
        ContractError: for anything else (a bool, a float, a negative number).
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ContractError(
            f"Received an invalid value for `{name}`, expected an integer >= 0 (0 = never). "
            f"Received: {name}={value!r}"
        )
    return int(value)


def histogram_kinds(histograms) -> tuple[str, ...]:
    """The histogram kinds asked for: `True` all, `False`/`None` none, a name or a subset.

    Raises:
        ContractError: for a kind that is not one of `HISTOGRAM_KINDS`.
    """
    if histograms is True:
        return HISTOGRAM_KINDS
    if histograms is False or histograms is None:
        return ()
    if isinstance(histograms, str):
        histograms = (histograms,)
    kinds = tuple(histograms)
    unknown = [k for k in kinds if k not in HISTOGRAM_KINDS]
    if unknown:
        raise ContractError(
            f"Received an invalid value for `histograms`, expected True, False or a subset of "
            f"{HISTOGRAM_KINDS}. Received: histograms={histograms!r}"
        )
    return kinds


def log_root(logdir, log_dir) -> str:
    """The log root from tfguard's `logdir` or Keras's `log_dir` (one of them, or `"logs"`).

    Raises:
        ContractError: for two different folders, or an empty path.
    """
    if logdir is not None and log_dir is not None and os.fspath(logdir) != os.fspath(log_dir):
        raise ContractError(
            "Received both `logdir` and `log_dir` (Keras's name), expected one of them. "
            f"Received: logdir={os.fspath(logdir)!r}, log_dir={os.fspath(log_dir)!r}")
    logdir = logdir if logdir is not None else (log_dir if log_dir is not None else "logs")
    if not os.fspath(logdir):
        raise ContractError("Received an invalid value for `logdir`, expected a directory path. Received: logdir=''")
    return os.fspath(logdir)


def check_callables(hparams, record_if, embeddings) -> None:
    """Checks `hparams` (a mapping), `record_if` (a function) and `embeddings` (a 2- or 3-tuple).

    Raises:
        ContractError: for a value of another kind.
    """
    if hparams is not None and not isinstance(hparams, Mapping):
        raise ContractError(
            f"Received an invalid value for `hparams`, expected a mapping name -> value. Received: {type(hparams).__name__}"
        )
    if record_if is not None and not callable(record_if):
        raise ContractError(
            f"Received an invalid value for `record_if`, expected a function step -> bool. Received: {record_if!r}"
        )
    if embeddings is not None and not (isinstance(embeddings, (tuple, list)) and len(embeddings) in (2, 3)):
        raise ContractError(
            "Received an invalid value for `embeddings`, expected (layer_name or callable, samples, labels). "
            f"Received: {type(embeddings).__name__}"
        )


def sample_images(images):
    """`images` as the Logger keeps it: `True`/`False` as 3/0 samples, a count checked, an array as is."""
    if isinstance(images, bool):
        images = DEFAULT_IMAGES if images else 0
    if isinstance(images, (int, np.integer)):
        images = check_every("images", images)
    return images


__all__ = ["DEFAULT_IMAGES", "HISTOGRAM_KINDS", "check_callables", "check_every", "histogram_kinds",
           "log_root", "sample_images"]
