"""Every docstring example in tfguard.lint runs and shows what it claims."""

import pytest

from tests.examples import assert_examples_pass

MODULES = [
    "tfguard.lint",
    "tfguard.lint.dataset",
    "tfguard.lint.dataset_graph",
    "tfguard.lint.describe",
    "tfguard.lint.finding",
    "tfguard.lint.front",
    "tfguard.lint.heads",
    "tfguard.lint.inputs",
    "tfguard.lint.labels",
    "tfguard.lint.losses",
    "tfguard.lint.model_lint",
    "tfguard.lint.render",
    "tfguard.lint.runner",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    assert_examples_pass(name)
