"""Every docstring example in tfguard.events runs and shows what it claims."""

import pytest

from tests.examples import assert_examples_pass

MODULES = [
    "tfguard.events",
    "tfguard.events.collect",
    "tfguard.events.columns",
    "tfguard.events.decode",
    "tfguard.events.logdir",
    "tfguard.events.records",
    "tfguard.events.run",
    "tfguard.events.selection",
    "tfguard.events.values",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    assert_examples_pass(name)
