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


def test_versions_fit_together(checks):
    import keras
    import tensorboard

    assert checks["python"].status == "ok" and platform.python_version() in checks["python"].detail
    assert checks["tensorflow"].status == "ok" and tf.__version__ in checks["tensorflow"].detail
    assert checks["keras"].status == "ok" and keras.__version__ in checks["keras"].detail
    assert checks["tensorboard"].status == "ok"
    assert tensorboard.__version__ in checks["tensorboard"].detail


def test_one_keras_here(checks):
    assert os.environ.get("TF_USE_LEGACY_KERAS") in (None, "", "0", "false")
    assert importlib.util.find_spec("tf_keras") is None
    assert checks["legacy_keras"].status == "ok"


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
