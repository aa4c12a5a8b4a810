"""Every docstring example in tfguard.diagnose runs and shows what it claims."""

import pytest

from tests.examples import assert_examples_pass

MODULES = [
    "tfguard.diagnose",
    "tfguard.diagnose.compare",
    "tfguard.diagnose.engine",
    "tfguard.diagnose.finding",
    "tfguard.diagnose.live",
    "tfguard.diagnose.normalize",
    "tfguard.diagnose.offline",
    "tfguard.diagnose.plots",
    "tfguard.diagnose.recorder",
    "tfguard.diagnose.report_html",
    "tfguard.diagnose.report_json",
    "tfguard.diagnose.report_terminal",
    "tfguard.diagnose.rules",
    "tfguard.diagnose.rules.activations",
    "tfguard.diagnose.rules.base",
    "tfguard.diagnose.rules.contract",
    "tfguard.diagnose.rules.data",
    "tfguard.diagnose.rules.gradients",
    "tfguard.diagnose.rules.loss_curve",
    "tfguard.diagnose.rules.numeric",
    "tfguard.diagnose.signals",
    "tfguard.diagnose.thresholds",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    assert_examples_pass(name)
