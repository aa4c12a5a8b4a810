import importlib.util
import json
import os
import platform
import subprocess
import sys

import pytest
import tensorflow as tf
from rich.console import Console

from tfguard.doctor import (
    DoctorCheck,
    check_legacy_keras,
    demonstrate_xla_asserts,
    doctor_exit_code,
    doctor_json,
    enable_memory_growth,
    judge_keras,
    judge_tensorboard,
    judge_tensorflow,
    keras_uses_xla,
    render_doctor,
    run_doctor,
)
from tfguard.errors import ContractError

NAMES = [
    "python",
    "tensorflow",
    "keras",
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


@pytest.fixture(scope="module")
def gpus():
    return tf.config.list_physical_devices("GPU")


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
    # whatever is installed, each line is the judge's verdict on it
    assert checks["tensorflow"] == judge_tensorflow(tf.__version__)
    assert checks["keras"].status == judge_keras(keras.__version__, keras.config.backend()).status


@pytest.mark.parametrize("version, status", [("2.21.0", "ok"), ("2.21.3rc1", "ok"), ("2.20.1", "warning"),
                                             ("2.22.0", "warning"), ("nightly", "warning")])
def test_tensorflow_verdicts(version, status):
    assert judge_tensorflow(version).status == status


@pytest.mark.parametrize("version, backend, status", [
    ("3.15.1", "tensorflow", "ok"), ("3.16.0.dev2026", "tensorflow", "ok"),
    ("3.14.0", "tensorflow", "warning"), ("2.15.0", "tensorflow", "problem"),
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


def test_the_legacy_keras_line_follows_this_environment(checks):
    two = os.environ.get("TF_USE_LEGACY_KERAS") not in (None, "", "0", "false") \
        or importlib.util.find_spec("tf_keras") is not None
    assert (checks["legacy_keras"].status != "ok") == two


@pytest.mark.parametrize(
    "value, status", [("True", "problem"), ("1", "problem"), ("0", "ok"), ("yes", "ok")]
)
def test_legacy_keras_env_follows_tensorflow_rule(monkeypatch, value, status):
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", value)
    check = check_legacy_keras()
    assert check.status == status
    if status == "problem":
        assert "tf_keras is not installed" in check.detail and "ImportError" in check.detail


def test_legacy_keras_in_a_fresh_process():
    code = (
        "import json\n"
        "from tfguard.doctor import run_doctor, doctor_json\n"
        "doc = json.loads(doctor_json(run_doctor(xla_demo=False)))\n"
        "import tensorflow as tf\n"
        "try:\n"
        "    tf.keras.Model\n"
        "    tf_keras_error = None\n"
        "except ImportError as e:\n"
        "    tf_keras_error = str(e)\n"
        "print(json.dumps({'doc': doc, 'tf_keras_error': tf_keras_error}))\n"
    )
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    legacy = next(c for c in got["doc"]["checks"] if c["name"] == "legacy_keras")
    assert legacy["status"] == "problem" and "TF_USE_LEGACY_KERAS=1" in legacy["detail"]
    assert got["doc"]["exit_code"] == 1
    assert got["tf_keras_error"]  # what the line claims really happens


def test_gpu_lines_match_this_machine(checks, gpus):
    if gpus:
        assert checks["gpu"].status == "ok" and f"{len(gpus)} GPU(s)" in checks["gpu"].detail
    else:
        assert "training runs on the CPU" in checks["gpu"].detail
        assert checks["memory_growth"].detail == "not applicable: no GPU"
        assert enable_memory_growth() == []
    info = tf.sysconfig.get_build_info()
    if info.get("is_cuda_build"):
        assert f"CUDA {info['cuda_version']}" in checks["cuda_build"].detail
        assert f"cuDNN {info['cudnn_version']}" in checks["cuda_build"].detail
    else:
        assert "CUDA" not in checks["cuda_build"].detail or "no CUDA" in checks["cuda_build"].detail


def test_xla_auto_follows_keras(checks, gpus):
    assert keras_uses_xla() == bool(gpus)
    assert checks["xla_auto"].status == ("warning" if gpus else "ok")


def test_xla_drops_asserts_for_real(checks):
    demo = demonstrate_xla_asserts()
    assert demo.eager_raised is True
    assert demo.xla_raised is False and demo.xla_output == [-2.0]
    line = checks["xla_asserts"].detail
    assert "eagerly it raised InvalidArgumentError" in line
    assert "returned [-2.0] without error" in line and "compile to nothing under XLA" in line


def test_profile_plugin_line(checks):
    present = importlib.util.find_spec("tensorboard_plugin_profile") is not None
    assert checks["profile_plugin"].status == ("ok" if present else "warning")
    if not present:
        assert checks["profile_plugin"].fix == "pip install tensorboard-plugin-profile"


def test_json_render_and_exit_code(checks):
    doc = json.loads(doctor_json(list(checks.values())))
    assert [c["name"] for c in doc["checks"]] == NAMES
    assert sum(doc["summary"].values()) == len(NAMES)
    assert doc["exit_code"] == doctor_exit_code(list(checks.values())) == 0  # no problem here
    problem = DoctorCheck("x", "problem", "broken", "fix it")
    assert doctor_exit_code([*checks.values(), problem]) == 1
    assert doctor_exit_code([DoctorCheck("y", "warning", "meh")]) == 0
    console = Console(record=True, width=200)
    render_doctor(list(checks.values()), console)
    text = console.export_text()
    assert all(name in text for name in NAMES) and "0 problem" in text


def test_status_is_validated():
    with pytest.raises(ContractError, match="Received: status='bad'"):
        DoctorCheck("x", "bad", "detail")
