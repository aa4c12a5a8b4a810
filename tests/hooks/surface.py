"""How a canary of the private Keras / TensorFlow surface fails: loudly, with the version and the name.

Each canary wraps what it checks in `canary(name)`: any failure inside
(an `AttributeError` from a renamed attribute, an assertion on what the
adapter returns) becomes one `Failed` that names the library, its version,
the private name, and where tfguard's adapter and its row in docs/internals.md live.

Example:

>>> with canary("Layer._flatten_layers"):
...     pass
"""

from __future__ import annotations

import contextlib

import keras
import pytest
import tensorflow as tf

from tfguard._versions import supported_range

_LIBRARIES = {
    "keras": ("Keras", lambda: keras.__version__, "tfguard/_hooks/keras_compat.py"),
    "tensorflow": ("TensorFlow", lambda: tf.__version__, "tfguard/_hooks/tf_compat.py"),
    "keras_20585": ("Keras", lambda: keras.__version__, "tfguard/_distribute/keras_20585.py"),
}


def changed(name: str, library: str, error: BaseException) -> str:
    """The message of a failed canary."""
    label, version, adapter = _LIBRARIES[library]
    return (
        f"{label} {version()} changed `{name}`, which tfguard relies on "
        f"({type(error).__name__}: {error}). {supported_range()}; the canaries run on each pair that "
        "docs/versions.md lists (make compat): "
        f"update {adapter} and its row in the table of docs/internals.md "
        "'Keras and TensorFlow internals tfguard still touches'."
    )


@contextlib.contextmanager
def canary(name: str, library: str = "keras"):
    """Turns any failure inside into a `Failed` naming `library`'s version and the private `name`.

    Args:
        name: the private attribute or module, as the table of docs/internals.md spells it.
        library: `"keras"`, `"tensorflow"` or `"keras_20585"` (the Keras
            workaround module). Defaults to `"keras"`.
    """
    try:
        yield
    except Exception as error:  # noqa: BLE001 - every way a release can change it is reported the same
        pytest.fail(changed(name, library, error))
