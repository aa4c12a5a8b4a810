"""Every docstring example in tfguard.summary runs and shows what it claims."""

import pytest

from tests.examples import assert_examples_pass

MODULES = [
    "tfguard.summary",
    "tfguard.summary.hparams",
    "tfguard.summary.images",
    "tfguard.summary.lifecycle",
    "tfguard.summary.logger",
    "tfguard.summary.projector",
    "tfguard.summary.rundir",
    "tfguard.summary.runinfo",
    "tfguard.summary.signals",
    "tfguard.summary.writers",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    assert_examples_pass(name)
