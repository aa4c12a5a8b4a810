"""Fixtures of the reference road's tests: one tiny real run shared by export and parity."""

from __future__ import annotations

import pytest

from tfguard.reference import load_data, run_demo


@pytest.fixture(scope="session")
def digits_small():
    """200 train and 200 test real digits, 28×28×1 uint8."""
    return load_data("digits", limit=200)


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """Four epochs of the reference CNN on 300 digits, exported, with parity measured."""
    root = tmp_path_factory.mktemp("demo")
    lines: list[str] = []
    result = run_demo(root, epochs=4, max_samples=300, progress=lines.append)
    result.lines = lines
    return result


@pytest.fixture(scope="session")
def export_dir(demo_run):
    return demo_run.export.export_dir
