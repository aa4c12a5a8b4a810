"""The one check behind `tests/test_doctests.py`: a module's docstring examples run as shown."""

from __future__ import annotations

import doctest
import importlib


def real_examples(module) -> int:
    """How many docstring examples of `module` run code (an example that is only a comment does not)."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    count = 0
    for test in finder.find(module):
        if test.globs.get("__name__") != module.__name__:
            continue
        count += sum(1 for ex in test.examples if not ex.source.strip().startswith("#"))
    return count


def assert_examples_pass(name: str) -> None:
    """Runs the examples of module `name`; it must have some that run code, and all must pass.

    Example:

    >>> assert_examples_pass("tfguard.tags")
    """
    module = importlib.import_module(name)
    assert real_examples(module) > 0, f"{name} has no example that runs code"
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} example(s) of {name} failed (see the output above)"
