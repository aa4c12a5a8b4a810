"""Every module of tfguard that defines something public shows it in a docstring example that passes.

The modules are found by walking the package, so a new module is covered
(and must bring an example) without editing this list. An example counts
when it shows a result (an output or an exception); a package `__init__`
that only re-exports needs none.
"""

import importlib
import pkgutil
import types

import pytest

import tfguard
from tests.examples import assert_examples_pass, defines_public, shown_examples

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(tfguard.__path__, prefix="tfguard.")
    if not info.name.endswith("__main__")
)


def test_the_walk_finds_the_package():
    assert "tfguard._firewall.step" in MODULES and "tfguard._tags" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    assert_examples_pass(name)


def test_an_example_that_shows_nothing_does_not_count():
    shows = types.ModuleType("shows", ">>> 1 + 1\n2\n>>> int('x')\nTraceback (most recent call last):\nValueError: ...\n")
    silent = types.ModuleType("silent", ">>> import math\n>>> x = math.pi\n")
    assert shown_examples(shows) == 2 and shown_examples(silent) == 0


def test_only_a_module_that_defines_something_must_show_it():
    assert defines_public(importlib.import_module("tfguard._hooks")) == []  # re-exports only
    assert "CheckResult" in defines_public(importlib.import_module("tfguard.checks._base"))
    assert "CheckResult" not in defines_public(importlib.import_module("tfguard.checks"))
