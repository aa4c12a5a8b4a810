"""The marker tfguard sets on the `fit` and train functions it installs, by one name.

A `fit` that carries the guard's epoch tracker (`tfguard.firewall.instrument.wrap_fit`),
the host loop's train function (`HostLoop.train_function`) and a Logger's
wrapper around such a train function carry `MARK` set true; a Logger
reads it to know that batches are pulled by tfguard's host loop (so a
first batch can be peeked without another trace).

Example:

>>> def train_function(iterator):
...     return {}
>>> marked(train_function)
False
>>> marked(mark(train_function))
True
"""

from __future__ import annotations

MARK = "_tfguard"
"""The attribute, set true on a function tfguard installed in a Keras model."""


def mark(function, value: bool = True):
    """Sets `MARK` on `function` to `value`; returns `function`."""
    setattr(function, MARK, bool(value))
    return function


def marked(function) -> bool:
    """Whether `function` (a `fit`, a train function, or `None`) was installed by tfguard."""
    return bool(getattr(function, MARK, False))


__all__ = ["MARK", "mark", "marked"]
