"""Whether a `fit` or a train function of a Keras model is one tfguard installed, read off the function.

A `fit` that carries the guard's epoch tracker (`tfguard._firewall.instrument.wrap_fit`),
the host loop's train function (`HostLoop.train_function`) and a Logger's
wrapper around such a train function carry `INSTALLED_ATTRIBUTE` set true; a
Logger reads it to know that batches are pulled by tfguard's host loop (so a
first batch can be peeked without another trace).

Example:

>>> def train_function(iterator):
...     return {}
>>> is_installed(train_function)
False
>>> is_installed(set_installed(train_function))
True
"""

from __future__ import annotations

INSTALLED_ATTRIBUTE = "_tfguard"
"""The attribute, set true on a function tfguard installed in a Keras model."""


def set_installed(function, value: bool = True):
    """Sets `INSTALLED_ATTRIBUTE` on `function` to `value`; returns `function`."""
    setattr(function, INSTALLED_ATTRIBUTE, bool(value))
    return function


def is_installed(function) -> bool:
    """Whether `function` (a `fit`, a train function, or `None`) was installed by tfguard."""
    return bool(getattr(function, INSTALLED_ATTRIBUTE, False))


__all__ = ["INSTALLED_ATTRIBUTE", "is_installed", "set_installed"]
