"""The supported TensorFlow / Keras range: one spelling in pyproject.toml and `tfguard._versions`, and the import warning.

The warning is checked in a fresh Python whose `sys.path` starts with a
folder of distribution metadata (`tensorflow-2.15.1.dist-info`, ...), which
is what `importlib.metadata` and pip read to know what is installed; the
pairs really installed and run are the compatibility suite's (`make compat`).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tfguard._versions import KERAS_RANGE, TENSORFLOW_RANGE, installed_pair, specifier

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def _requirements() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {Requirement(r).name: Requirement(r) for r in project["dependencies"]}


def test_pyproject_declares_the_range_tfguard_versions_judges_by():
    requirements = _requirements()
    assert requirements["tensorflow"].specifier == SpecifierSet(specifier(TENSORFLOW_RANGE)) == SpecifierSet(">=2.16,<2.22")
    assert requirements["keras"].specifier == SpecifierSet(specifier(KERAS_RANGE)) == SpecifierSet(">=3.7,<3.16")
    # tf.summary needs TensorBoard, which TensorFlow 2.21 no longer installs: the same minors as TensorFlow
    assert requirements["tensorboard"].specifier == SpecifierSet(specifier(TENSORFLOW_RANGE))


def test_the_core_does_not_install_the_road():
    requirements = _requirements()
    assert "scikit-learn" not in requirements and "ai-edge-litert" not in requirements
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert sorted(Requirement(r).name for r in extras["road"]) == ["ai-edge-litert", "scikit-learn"]


def test_the_pinned_development_pair_is_supported():
    locked = dict(line.split("#")[0].strip().split("==") for line in (ROOT / "requirements.lock").read_text().splitlines()
                  if "==" in line)
    assert installed_pair().supported
    assert (locked["tensorflow"], locked["keras"]) == (installed_pair().tensorflow, installed_pair().keras)


def _fake_distribution(root: Path, name: str, version: str) -> None:
    info = root / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def _import_tfguard(tmp_path: Path, **installed: str) -> subprocess.CompletedProcess:
    """`import tfguard` in a fresh Python that sees `installed` (name -> version) before the real packages."""
    for name, version in installed.items():
        _fake_distribution(tmp_path, name, version)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(SRC)])}
    return subprocess.run([sys.executable, "-W", "default", "-c", "import tfguard, tfguard._versions"],
                          capture_output=True, text=True, timeout=60, env=env, check=False)


@pytest.mark.parametrize("tensorflow, keras, fix", [
    ("2.15.1", "2.15.0", "pip install 'tensorflow>=2.16,<2.22' 'keras>=3.7,<3.16'"),
    ("2.19.1", "3.6.0", "pip install 'keras>=3.7,<3.16'"),
])
def test_importing_with_an_unsupported_pair_warns_once_naming_both_and_the_range(tmp_path, tensorflow, keras, fix):
    result = _import_tfguard(tmp_path, tensorflow=tensorflow, keras=keras)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if ": UnsupportedVersionsWarning: " in line]
    assert len(warnings) == 1, result.stderr
    assert f"TensorFlow {tensorflow} with Keras {keras}: not supported" in warnings[0]
    assert "tfguard supports TensorFlow >=2.16,<2.22 with Keras >=3.7,<3.16" in warnings[0]
    assert warnings[0].endswith(f"Try: {fix}")


def test_importing_with_a_supported_pair_says_nothing(tmp_path):
    result = _import_tfguard(tmp_path, tensorflow="2.16.2", keras="3.7.0")
    assert result.returncode == 0 and result.stderr == ""



def _ci_pairs() -> list[tuple[str, str]]:
    """`compat/pairs.py`'s PAIRS (read, not imported: it is a script) as `(tensorflow, keras)`."""
    tree = ast.parse((ROOT / "compat" / "pairs.py").read_text())
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["PAIRS"]]
    return [tuple(pair.split("/")) for pair in ast.literal_eval(value)]


def test_ci_runs_the_oldest_supported_pair_and_the_docs_name_what_it_ran():
    pairs = _ci_pairs()
    assert pairs[0] == ("2.16.2", "3.7.0")  # the oldest TensorFlow with the oldest Keras tfguard supports
    assert pairs[0][1].startswith(KERAS_RANGE[0] + ".") and pairs[0][0].startswith(TENSORFLOW_RANGE[0] + ".")
    docs = (ROOT / "docs" / "versions.md").read_text()
    canaries = {path: " ".join((ROOT / path).read_text().split()) for path in (
        "tests/hooks/test_keras_surface.py", "tests/hooks/test_tf_surface.py",
        "tests/distribute/test_keras_20585_surface.py")}
    for tensorflow, keras in pairs:
        assert f"| {tensorflow} | {keras} | " in docs and "CI: compat suite" in docs
        for path, text in canaries.items():  # each canary module names the pairs it is checked on
            named = f"TensorFlow {tensorflow} with Keras {keras}" in text or f"{tensorflow} with {keras}" in text
            assert named, f"{path} does not name the pair {tensorflow} / {keras} that make compat checks it on"
