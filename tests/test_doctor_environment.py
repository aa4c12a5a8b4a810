"""The doctor's lines against the machine the tests run on (environment tests, on purpose).

These compare what `run_doctor` reports with what this environment really
has: GPUs, the CUDA build, a second Keras, the profile plugin. They assert
what is true either way (with or without a GPU, with or without the plugin),
so they pass on a laptop and on a GPU machine alike; the code's own branches
are tested with controlled inputs in `tests/test_doctor.py`. Run them alone
with `pytest -m environment`.
"""

import importlib.util
import os

import pytest
import tensorflow as tf

from tfguard.doctor import demonstrate_xla_asserts, enable_memory_growth, keras_uses_xla, run_doctor

pytestmark = pytest.mark.environment


@pytest.fixture(scope="module")
def checks():
    return {c.name: c for c in run_doctor(xla_demo=False)}


@pytest.fixture(scope="module")
def gpus():
    return tf.config.list_physical_devices("GPU")


def test_the_legacy_keras_line_follows_this_environment(checks):
    two = os.environ.get("TF_USE_LEGACY_KERAS") not in (None, "", "0", "false") \
        or importlib.util.find_spec("tf_keras") is not None
    assert (checks["legacy_keras"].status != "ok") == two


def test_the_gpu_lines_match_this_machine(checks, gpus):
    if gpus:
        assert checks["gpu"].status == "ok" and f"{len(gpus)} GPU(s)" in checks["gpu"].detail
        assert checks["memory_growth"].detail != "not applicable: no GPU"
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


def test_xla_drops_asserts_for_real():
    # the fact the doctor's xla_asserts line demonstrates: TensorFlow's XLA compiles a failing
    # tf.debugging assert to nothing (on a CPU as on a GPU)
    demo = demonstrate_xla_asserts()
    assert demo.eager_raised is True
    assert demo.xla_raised is False and demo.xla_output == [-2.0]


def test_xla_auto_follows_keras(checks, gpus):
    # Keras resolves jit_compile="auto" to XLA exactly when it sees a GPU
    assert keras_uses_xla() == bool(gpus)
    assert checks["xla_auto"].status == ("warning" if gpus else "ok")


def test_the_profile_plugin_line_follows_this_environment(checks):
    present = importlib.util.find_spec("tensorboard_plugin_profile") is not None
    assert checks["profile_plugin"].status == ("ok" if present else "warning")
    if not present:
        assert checks["profile_plugin"].fix == "pip install tensorboard-plugin-profile"
