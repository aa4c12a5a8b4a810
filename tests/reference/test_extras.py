"""Without the road extra, the road's commands fail with one typed error that says what to install.

scikit-learn and ai-edge-litert are installed here (`make test` installs
everything); a Python in which they cannot be imported is made the way
Python documents for a missing module: `sys.modules[name] = None` makes
`import name` raise `ModuleNotFoundError`. The compatibility suite runs the
same command where the extra is really not installed (`make compat`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tfguard._errors import MissingExtraError, TfguardError
from tfguard.reference._extras import road_module

CLI_WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from tfguard._cli import main
raise SystemExit(main(sys.argv[2:]))
"""


def _cli_without(modules: str, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(CLI_WITHOUT), modules, *argv],
                          capture_output=True, text=True, timeout=300, env=env, check=False)


def test_a_missing_road_package_is_a_typed_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(MissingExtraError) as caught:
        road_module("sklearn.datasets", "The digits data set")
    error = caught.value
    assert isinstance(error, ImportError) and isinstance(error, TfguardError)
    assert (error.extra, error.package, error.exit_code) == ("road", "scikit-learn", 2)
    assert error.message.startswith("The digits data set needs scikit-learn (module `sklearn`), which is not installed")
    assert sys.executable in error.message
    assert error.hint == "pip install 'tfguard[road]' (or only: pip install scikit-learn)"


def test_the_demo_without_scikit_learn_says_how_to_get_it(tmp_path):
    result = _cli_without("sklearn", "demo", "--root", str(tmp_path / "demo"), "--epochs", "1")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "ERROR" in result.stderr and "needs scikit-learn (module `sklearn`), which is not installed" in result.stderr
    assert "hint: pip install 'tfguard[road]' (or only: pip install scikit-learn)" in result.stderr
    assert "Traceback" not in result.stderr


def test_parity_without_the_tflite_interpreter_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)
    from tfguard.reference._parity import run_tflite

    with pytest.raises(MissingExtraError, match=r"needs ai-edge-litert \(module `ai_edge_litert`\)") as caught:
        run_tflite(tmp_path / "model.tflite", None)
    assert caught.value.hint == "pip install 'tfguard[road]' (or only: pip install ai-edge-litert)"


def test_a_broken_import_inside_an_installed_package_is_not_called_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # sklearn is there; one of its modules fails
    with pytest.raises(ModuleNotFoundError) as caught:
        road_module("sklearn.datasets", "The digits data set")
    assert not isinstance(caught.value, MissingExtraError)
