"""Every docstring example in tfguard.attach runs and shows what it claims."""

import pytest

from tests.examples import assert_examples_pass

MODULES = [
    "tfguard.attach",
    "tfguard.attach.fitcall",
    "tfguard.attach.hidden_logs",
    "tfguard.attach.render",
    "tfguard.attach.report",
    "tfguard.attach.script",
    "tfguard.attach.session",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that would write under runs/ write here
    assert_examples_pass(name)
