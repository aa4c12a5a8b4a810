"""`make test` sends the tests that share a wider fixture to one worker (`tests/conftest.py`).

pytest-xdist reads the group from the test's node id (`--dist loadgroup`);
a pytest that keeps node ids elsewhere drops the group without a word and
the shared fixtures are made once per worker (pytest 9.2 with
pytest-xdist 3.8: pytest-dev/pytest-xdist#1386). This test says so.
"""

from __future__ import annotations

import pytest

from tests.conftest import shared_group


@pytest.fixture(scope="module")
def made_once_for_this_module():
    return object()


def test_a_test_with_a_module_fixture_is_grouped_by_its_file(request, made_once_for_this_module):
    assert shared_group(request.node) == "tests/test_worker_groups.py"


def test_a_test_with_fixtures_of_its_own_is_not_grouped(request, tmp_path):
    assert shared_group(request.node) is None


def test_under_make_test_the_group_reaches_xdist(request, made_once_for_this_module):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("only in a worker of `pytest -n 2 --dist loadgroup` (make test)")
    assert request.node.nodeid.endswith("@tests/test_worker_groups.py")
