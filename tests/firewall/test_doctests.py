"""Every docstring example in tfguard.firewall runs and shows what it claims."""

import pytest

from tests.examples import assert_examples_pass

MODULES = [
    "tfguard.firewall",
    "tfguard.firewall.config",
    "tfguard.firewall.guard",
    "tfguard.firewall.instrument",
    "tfguard.distribute.multiworker",
    "tfguard.firewall.stats",
    "tfguard.firewall.taps",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    assert_examples_pass(name)
