"""The one check behind `tests/test_doctests.py`: a module's docstring examples run as shown."""

from __future__ import annotations

import doctest
import importlib
import inspect


def shown_examples(module) -> int:
    """How many docstring examples of `module` show a result: an expected output or exception.

    An example that shows nothing (an import, a call whose result is not
    shown, a comment) runs, but a reader cannot check anything against it,
    so it does not count.

    Example:

    >>> shown_examples(importlib.import_module("tfguard._tags")) > 0
    True
    """
    finder = doctest.DocTestFinder(exclude_empty=True)
    count = 0
    for test in finder.find(module):
        if test.globs.get("__name__") != module.__name__:
            continue
        count += sum(1 for ex in test.examples if ex.want.strip() or ex.exc_msg)
    return count


def defines_public(module) -> list[str]:
    """The public functions and classes `module` defines itself (not those it re-exports).

    Example:

    >>> defines_public(importlib.import_module("tfguard._hooks"))
    []
    """
    return sorted(name for name, value in vars(module).items()
                  if not name.startswith("_") and (inspect.isfunction(value) or inspect.isclass(value))
                  and value.__module__ == module.__name__)


def assert_examples_pass(name: str) -> None:
    """Runs the examples of module `name`; all must pass, and one must show a result.

    A module that only re-exports (a package's `__init__`) needs no example
    of its own: its names are shown where they are defined.
    """
    module = importlib.import_module(name)
    defined = defines_public(module)
    if defined:
        assert shown_examples(module) > 0, (
            f"{name} defines {', '.join(defined[:5])}{' ...' if len(defined) > 5 else ''} but none of "
            "its docstring examples shows a result. Expected at least one example with an output "
            "or an exception a reader can check; add one that shows what the code does."
        )
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} example(s) of {name} failed (see the output above)"
