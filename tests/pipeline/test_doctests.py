"""Every docstring example in tfguard.pipeline runs and shows what it claims."""

import pytest

from tests.examples import assert_examples_pass

MODULES = [
    "tfguard.pipeline.data",
    "tfguard.pipeline.demo",
    "tfguard.pipeline.export",
    "tfguard.pipeline.idx",
    "tfguard.pipeline.input",
    "tfguard.pipeline.models",
    "tfguard.pipeline.parity",
    "tfguard.pipeline.train",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    assert_examples_pass(name)
