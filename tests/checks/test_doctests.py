"""Every docstring example in tfguard.checks runs and shows what it claims."""

import pytest

from tests.examples import assert_examples_pass

MODULES = [
    "tfguard.checks",
    "tfguard.checks.base",
    "tfguard.checks.contract",
    "tfguard.checks.labels",
    "tfguard.checks.shapes",
    "tfguard.checks.values",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    assert_examples_pass(name)
