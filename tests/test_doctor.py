"""The doctor's code with controlled inputs; its lines against this machine: `test_doctor_environment.py`."""

import json
import os
import platform
import subprocess
import sys

import pytest
import tensorflow as tf
from rich.console import Console

from tfguard._errors import ContractError
from tfguard.doctor import (
    DoctorCheck,
    check_legacy_keras,
    check_profile_plugin,
    demonstrate_xla_asserts,
    doctor_exit_code,
    doctor_json,
    judge_keras,
    judge_tensorboard,
    judge_versions,
    render_doctor,
    run_doctor,
)

NAMES = [
    "python",
    "tensorflow",
    "keras",
    "versions",
    "tensorboard",
    "legacy_keras",
    "gpu",
    "cuda_build",
    "memory_growth",
    "xla_auto",
    "xla_asserts",
    "profile_plugin",
]


@pytest.fixture(scope="module")
def checks():
    return {c.name: c for c in run_doctor()}


def test_every_line_in_order(checks):
    assert list(checks) == NAMES
    assert all(c.status in ("ok", "warning", "problem") for c in checks.values())
    assert all(c.fix for c in checks.values() if c.status != "ok")


def test_the_lines_name_the_installed_versions(checks):
    import keras
    import tensorboard

    assert platform.python_version() in checks["python"].detail
    assert tf.__version__ in checks["tensorflow"].detail
    assert keras.__version__ in checks["keras"].detail
    assert tensorboard.__version__ in checks["tensorboard"].detail
    assert f"TensorFlow {tf.__version__} with Keras {keras.__version__}: supported" in checks["versions"].detail


@pytest.mark.parametrize("tensorflow, keras, status, fix", [
    ("2.16.2", "3.7.0", "ok", None), ("2.21.3rc1", "3.15.1", "ok", None), ("2.19.1", "3.10.0", "ok", None),
    ("2.22.0", "3.15.1", "warning", "pip install 'tensorflow>=2.16,<2.22' 'keras>=3.7,<3.16'"),
    ("2.21.0", "3.16.0.dev2026", "warning", "pip install 'keras>=3.12,<3.16'"),
    ("2.15.1", "2.15.0", "problem", "pip install 'tensorflow>=2.16,<2.22' 'keras>=3.7,<3.16'"),
    ("2.16.2", "3.6.0", "problem", "pip install 'keras>=3.7,<3.16'"),
    ("2.21.0", "3.10.0", "problem", "pip install 'keras>=3.12,<3.16'"),  # TensorFlow 2.21 itself needs 3.12
    ("nightly", "3.15.1", "problem", "pip install 'tensorflow>=2.16,<2.22' 'keras>=3.7,<3.16'"),
])
def test_the_pair_is_judged_against_the_supported_range(tensorflow, keras, status, fix):
    verdict = judge_versions(tensorflow, keras)
    assert (verdict.status, verdict.fix) == (status, fix)
    assert f"TensorFlow {tensorflow} with Keras {keras}" in verdict.detail
    assert ">=2.16,<2.22" in verdict.detail and ">=3.7,<3.16" in verdict.detail  # the range, with the pair


@pytest.mark.parametrize("version, backend, status", [
    ("3.15.1", "tensorflow", "ok"), ("3.16.0.dev2026", "tensorflow", "ok"),
    ("3.7.0", "tensorflow", "ok"), ("2.15.0", "tensorflow", "problem"),
    ("3.15.1", "torch", "problem"),
])
def test_keras_verdicts(version, backend, status):
    verdict = judge_keras(version, backend)
    assert verdict.status == status and version in verdict.detail
    assert (verdict.fix is not None) == (status != "ok")


@pytest.mark.parametrize("version, tf_version, has_scalar, status", [
    ("2.21.0", "2.21.0", True, "ok"), (None, "2.21.0", False, "problem"),
    ("2.21.0", "2.21.0", False, "problem"), ("2.20.0", "2.21.0", True, "warning"),
])
def test_tensorboard_verdicts(version, tf_version, has_scalar, status):
    assert judge_tensorboard(version, tf_version, has_scalar).status == status


@pytest.mark.parametrize(
    "value, status", [("True", "problem"), ("1", "problem"), ("0", "ok"), ("yes", "ok")]
)
def test_legacy_keras_env_follows_tensorflow_rule(monkeypatch, value, status):
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", value)
    check = check_legacy_keras()
    assert check.status == status
    if status == "problem":
        assert "tf_keras is not installed" in check.detail and "ImportError" in check.detail


@pytest.fixture(scope="module")
def no_gpu_legacy_env():
    """The doctor in a fresh process that sees no GPU and has `TF_USE_LEGACY_KERAS=1`."""
    code = (
        "import json\n"
        "from tfguard.doctor import run_doctor, doctor_json, enable_memory_growth\n"
        "doc = json.loads(doctor_json(run_doctor(xla_demo=False)))\n"
        "import tensorflow as tf\n"
        "try:\n"
        "    tf.keras.Model\n"
        "    tf_keras_error = None\n"
        "except ImportError as e:\n"
        "    tf_keras_error = str(e)\n"
        "print(json.dumps({'doc': doc, 'tf_keras_error': tf_keras_error,\n"
        "                  'grown': enable_memory_growth()}))\n"
    )
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "CUDA_VISIBLE_DEVICES": "-1",
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    got["lines"] = {c["name"]: c for c in got["doc"]["checks"]}
    return got


def test_legacy_keras_in_a_fresh_process(no_gpu_legacy_env):
    legacy = no_gpu_legacy_env["lines"]["legacy_keras"]
    assert legacy["status"] == "problem" and "TF_USE_LEGACY_KERAS=1" in legacy["detail"]
    assert no_gpu_legacy_env["doc"]["exit_code"] == 1
    assert no_gpu_legacy_env["tf_keras_error"]  # what the line claims really happens


def test_without_a_visible_gpu_the_lines_say_training_runs_on_the_cpu(no_gpu_legacy_env):
    lines = no_gpu_legacy_env["lines"]
    assert "training runs on the CPU" in lines["gpu"]["detail"]
    assert lines["memory_growth"] == {"name": "memory_growth", "status": "ok",
                                      "detail": "not applicable: no GPU", "fix": None}
    assert lines["xla_auto"]["status"] == "ok" and "does not use XLA" in lines["xla_auto"]["detail"]
    assert no_gpu_legacy_env["grown"] == []


def _fake_distribution(root, name: str, version: str) -> None:
    """An installed distribution as `importlib.metadata` finds it: a dist-info folder on sys.path."""
    info = root / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_tf_keras_installed_next_to_keras_3_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    _fake_distribution(tmp_path, "tf_keras", "2.17.0")
    monkeypatch.syspath_prepend(str(tmp_path))
    check = check_legacy_keras()
    assert check.status == "warning" and "tf_keras 2.17.0 (Keras 2) is installed" in check.detail
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    check = check_legacy_keras()
    assert check.status == "problem" and "`tf.keras` is tf_keras 2.17.0" in check.detail


def test_an_installed_profile_plugin_is_named_with_its_version(tmp_path, monkeypatch):
    _fake_distribution(tmp_path, "tensorboard_plugin_profile", "2.21.9")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert check_profile_plugin() == DoctorCheck(
        "profile_plugin", "ok", "tensorboard_plugin_profile 2.21.9")


def test_the_xla_line_says_what_the_demo_did(checks):
    demo = demonstrate_xla_asserts()
    line = checks["xla_asserts"].detail
    if demo.xla_error is not None:
        assert checks["xla_asserts"].status == "warning" and "could not compile" in line
        return
    eager = "raised InvalidArgumentError" if demo.eager_raised else "did NOT raise"
    assert f"eagerly it {eager}" in line
    if demo.xla_raised:
        assert "asserts are kept by XLA here" in line
    else:
        assert f"returned {demo.xla_output} without error" in line
        assert "compile to nothing under XLA" in line


def test_json_render_and_exit_code(checks):
    found = list(checks.values())
    doc = json.loads(doctor_json(found))
    assert [c["name"] for c in doc["checks"]] == NAMES
    assert doc["summary"] == {s: sum(c.status == s for c in found) for s in ("ok", "warning", "problem")}
    assert doc["exit_code"] == doctor_exit_code(found)
    problem = DoctorCheck("x", "problem", "broken", "fix it")
    assert doctor_exit_code([*found, problem]) == 1
    assert doctor_exit_code([DoctorCheck("y", "warning", "meh")]) == 0
    assert doctor_exit_code([DoctorCheck("y", "warning", "meh"), DoctorCheck("z", "ok", "fine")]) == 0
    console = Console(record=True, width=200)
    render_doctor([*found, problem], console)
    text = console.export_text()
    assert all(name in text for name in NAMES) and "broken" in text and "fix it" in text
    assert f"{doc['summary']['problem'] + 1} problem" in text


def test_status_is_validated():
    with pytest.raises(ContractError, match="Received: status='bad'"):
        DoctorCheck("x", "bad", "detail")
