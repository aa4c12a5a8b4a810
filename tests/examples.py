"""The one check behind every `test_doctests.py`: a module's docstring examples run as shown."""

from __future__ import annotations

import doctest
import importlib


def assert_examples_pass(name: str) -> None:
    """Runs the examples of module `name`; it must have some, and all must show what they claim.

    Example:

    >>> assert_examples_pass("tfguard.tags")
    """
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0, f"{result.failed} example(s) of {name} failed (see the output above)"
