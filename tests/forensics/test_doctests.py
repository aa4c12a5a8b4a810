"""Every docstring example in tfguard.forensics runs and shows what it claims."""

import pytest

from tests.examples import assert_examples_pass

MODULES = [
    "tfguard.forensics",
    "tfguard.forensics.quarantine",
    "tfguard.forensics.replay",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    assert_examples_pass(name)
