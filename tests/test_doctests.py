"""Every module of tfguard has docstring examples that run code, and they show what they claim.

The modules are found by walking the package, so a new module is covered
(and must bring an example) without editing this list.
"""

import pkgutil

import pytest

import tfguard
from tests.examples import assert_examples_pass

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(tfguard.__path__, prefix="tfguard.")
    if not info.name.endswith("__main__")
)


def test_the_walk_finds_the_package():
    assert "tfguard.firewall.step" in MODULES and "tfguard.tags" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    assert_examples_pass(name)
