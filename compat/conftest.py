"""The compatibility suite's fixtures: the pair this virtualenv holds, and small real programs.

`make compat` (`compat/pairs.py`) builds a virtualenv per TensorFlow / Keras
pair, installs tfguard's wheel into it the way a user does, and runs these
tests there, with `TFGUARD_COMPAT_TENSORFLOW` / `TFGUARD_COMPAT_KERAS`
naming the pair it installed and `TFGUARD_COMPAT_FREEZE` the folder of the
`pip freeze` taken before and after tfguard's install.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402


def pytest_report_header(config):
    import tfguard

    return (f"tfguard compat: TensorFlow {tf.__version__} with Keras {keras.__version__}, numpy {np.__version__}, "
            f"Python {sys.version.split()[0]}; tfguard {tfguard.__version__} from {Path(tfguard.__file__).parent}")


@pytest.fixture(scope="session")
def expected_pair() -> tuple[str, str]:
    """The `(tensorflow, keras)` versions `compat/pairs.py` installed here, or this Python's own."""
    return (os.environ.get("TFGUARD_COMPAT_TENSORFLOW", tf.__version__),
            os.environ.get("TFGUARD_COMPAT_KERAS", keras.__version__))


@pytest.fixture(scope="session")
def freeze_dir() -> Path:
    folder = os.environ.get("TFGUARD_COMPAT_FREEZE")
    if not folder:
        pytest.skip("run by compat/pairs.py (make compat), which records pip freeze around the install")
    return Path(folder)
