"""Every docstring example in tfguard.attach runs and shows what it claims."""

import doctest
import importlib

import pytest

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
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
