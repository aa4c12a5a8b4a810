"""How tfguard is packaged: its license the PEP 639 way, and its type annotations (PEP 561).

Read from `pyproject.toml` and the files it names, so the check needs no
build and no package index. A wheel built from this tree carries
`License-Expression: Apache-2.0`, `dist-info/licenses/LICENSE` and
`tfguard/py.typed` (`pip wheel --no-deps -w DIR .`).
"""

import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_license_is_an_spdx_expression_with_its_file(pyproject):
    project = pyproject["project"]
    assert project["license"] == "Apache-2.0"  # not the deprecated {text = ...} table
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the whole text, not a stub
    # PEP 639: a license classifier next to an SPDX expression is an error
    assert not [c for c in project.get("classifiers", []) if c.startswith("License ::")]


def test_the_build_backend_understands_an_spdx_license(pyproject):
    (setuptools,) = [Requirement(r) for r in pyproject["build-system"]["requires"]
                     if Requirement(r).name == "setuptools"]
    # setuptools reads `license` as an SPDX string and `license-files` from 77.0 on
    assert setuptools.specifier.contains("77.0") and not setuptools.specifier.contains("76.3")


def test_the_package_ships_py_typed(pyproject):
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["tfguard"]
    assert (ROOT / "src" / "tfguard" / "py.typed").is_file()
