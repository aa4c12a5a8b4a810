"""Programs run in a process of their own, on two logical CPUs: MirroredStrategy's replicas.

The logical devices must be set before TensorFlow starts, so each program
is a process: `TWO_CPUS` begins it (NumPy, TensorFlow, Keras and tfguard
imported, `strategy` made), `run` starts it with the repository on its path.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TWO_CPUS = textwrap.dedent(
    """
    import sys
    import numpy as np, tensorflow as tf, keras
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
    import tfguard
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    """
)

ROOT = Path(__file__).resolve().parents[2]


def run(program: str, *args: str) -> subprocess.CompletedProcess:
    """Runs `TWO_CPUS + program` with `args` in a new process (the repository importable: `tests.…`, and its `src` first)."""
    return subprocess.run(
        [sys.executable, "-c", TWO_CPUS + textwrap.dedent(program), *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"},
    )
