"""The TensorFlow and Keras versions tfguard supports, and the verdict on the installed pair.

One place for the range: `pyproject.toml` declares the same specifiers
(`tests/test_versions.py` holds them equal), `tfguard doctor` judges the
installed pair with `judge_pair`, and `import tfguard` warns once
(`UnsupportedVersionsWarning`) when the pair is outside it. The versions
are read from the installed distributions' metadata, so nothing here
imports TensorFlow or Keras. docs/versions.md lists the pairs tested and
what ran on each.

Example:

>>> judge_pair("2.19.1", "3.10.0").supported
True
>>> verdict = judge_pair("2.15.1", "2.15.0")
>>> verdict.supported, verdict.fix
(False, "pip install 'tensorflow>=2.16,<2.22' 'keras>=3.7,<3.16'")
>>> judge_pair("2.21.0", "3.10.0").fix  # TensorFlow 2.21 itself needs Keras 3.12
"pip install 'keras>=3.12,<3.16'"
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import warnings

from packaging.version import InvalidVersion, Version

TENSORFLOW_RANGE = ("2.16", "2.22")
"""`(oldest, first unsupported)`: 2.16 is the first TensorFlow whose `tf.keras` is Keras 3; 2.21 the newest tested."""

KERAS_RANGE = ("3.7", "3.16")
"""`(oldest, first unsupported)`: 3.7 is the oldest Keras tfguard passes on (3.6 has no
`keras.tree.flatten_with_path`); 3.15 the newest tested. docs/versions.md has the measurements."""

KERAS_FLOOR_OF_TENSORFLOW = {(2, 20): "3.10", (2, 21): "3.12"}
"""The oldest Keras a TensorFlow minor release itself requires (its wheel's `Requires-Dist`), where above ours."""

TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tensorflow-intel", "tf-nightly")
"""The names TensorFlow is installed under, the first found wins."""


class UnsupportedVersionsWarning(UserWarning):
    """The installed TensorFlow / Keras pair is outside the range tfguard supports (warned once, at import)."""


@dataclasses.dataclass(frozen=True)
class PairVerdict:
    """What tfguard makes of one TensorFlow / Keras pair.

    Args:
        tensorflow: the TensorFlow version, or `None` when not installed.
        keras: the Keras version, or `None` when not installed.
        supported: both are in range and Keras meets this TensorFlow's own floor.
        newer: unsupported only because a version is newer than the newest tested.
        fix: the `pip install` that gives a supported pair, or `None` when supported.
    """

    tensorflow: str | None
    keras: str | None
    supported: bool
    newer: bool = False
    fix: str | None = None

    def describe(self) -> str:
        """One line: the pair, whether tfguard supports it, and the range.

        Example:

        >>> judge_pair("2.16.2", "3.7.0").describe()
        'TensorFlow 2.16.2 with Keras 3.7.0: supported (tfguard supports TensorFlow >=2.16,<2.22 with Keras >=3.7,<3.16)'
        """
        pair = f"TensorFlow {self.tensorflow or '(not installed)'} with Keras {self.keras or '(not installed)'}"
        if self.supported:
            return f"{pair}: supported ({supported_range()})"
        why = "newer than tfguard was tested with" if self.newer else "not supported"
        return f"{pair}: {why} ({supported_range()}{self._floor_note()})"

    def _floor_note(self) -> str:
        floor, keras = _tensorflow_keras_floor(self.tensorflow), _parsed(self.keras)
        below = floor is not None and keras is not None and Version(keras.base_version) < Version(floor)
        return f"; TensorFlow {self.tensorflow} itself needs Keras >={floor}" if below else ""


def specifier(version_range: tuple[str, str]) -> str:
    """`'>=2.16,<2.22'` for `('2.16', '2.22')`: what pyproject.toml and `pip install` spell."""
    return f">={version_range[0]},<{version_range[1]}"


def supported_range() -> str:
    """`'tfguard supports TensorFlow >=2.16,<2.22 with Keras >=3.7,<3.16'`."""
    return f"tfguard supports TensorFlow {specifier(TENSORFLOW_RANGE)} with Keras {specifier(KERAS_RANGE)}"


def _parsed(version: str | None) -> Version | None:
    try:
        return Version(version) if version else None
    except InvalidVersion:
        return None


def _tensorflow_keras_floor(tensorflow: str | None) -> str | None:
    parsed = _parsed(tensorflow)
    return KERAS_FLOOR_OF_TENSORFLOW.get(parsed.release[:2]) if parsed else None


def _newer(version: Version | None, version_range: tuple[str, str]) -> bool:
    """At or past the first unsupported release of `version_range` (by release numbers)."""
    return version is not None and Version(version.base_version) >= Version(version_range[1])


def judge_pair(tensorflow: str | None, keras: str | None) -> PairVerdict:
    """Whether tfguard supports this TensorFlow / Keras pair, and the `pip install` that gives one it does.

    A pre-release or nightly counts by its release numbers (`2.21.0rc1` is
    2.21). What to install keeps whatever is already in range: a supported
    TensorFlow with an unsupported Keras gets only a Keras to install.

    Args:
        tensorflow: the installed TensorFlow version, or `None`.
        keras: the installed Keras version, or `None`.

    Returns:
        A `PairVerdict`.
    """
    tf_version, keras_version = _parsed(tensorflow), _parsed(keras)
    tf_ok = _within(tf_version, TENSORFLOW_RANGE)
    floor = _tensorflow_keras_floor(tensorflow) if tf_ok else None
    keras_range = (max(KERAS_RANGE[0], floor, key=Version), KERAS_RANGE[1]) if floor else KERAS_RANGE
    keras_ok = _within(keras_version, keras_range)
    if tf_ok and keras_ok:
        return PairVerdict(tensorflow, keras, supported=True)
    newer = (tf_ok or _newer(tf_version, TENSORFLOW_RANGE)) and (keras_ok or _newer(keras_version, KERAS_RANGE))
    wanted = [] if tf_ok else [f"'tensorflow{specifier(TENSORFLOW_RANGE)}'"]
    wanted.append(f"'keras{specifier(keras_range)}'")
    return PairVerdict(tensorflow, keras, supported=False, newer=newer, fix="pip install " + " ".join(wanted))


def _within(version: Version | None, version_range: tuple[str, str]) -> bool:
    """In `[oldest, first unsupported)` by release numbers: `2.21.0rc1` and `2.21.0.dev20260101` are 2.21."""
    if version is None:
        return False
    release = Version(version.base_version)
    return Version(version_range[0]) <= release < Version(version_range[1])


def installed_version(*distributions: str) -> str | None:
    """The version of the first of `distributions` installed here, or `None`; imports nothing."""
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def installed_pair() -> PairVerdict:
    """The verdict on the TensorFlow and Keras installed here (read from their metadata, not imported)."""
    return judge_pair(installed_version(*TENSORFLOW_DISTRIBUTIONS), installed_version("keras"))


def warn_if_unsupported() -> PairVerdict:
    """Warns once (`UnsupportedVersionsWarning`) when an installed pair is outside the range; the verdict.

    Nothing is said when TensorFlow is not installed at all: reading logs
    and diagnosing them (`tfguard diagnose`, `report`, `compare`) needs
    neither, and `tfguard doctor` reports the missing install.
    """
    verdict = installed_pair()
    if not verdict.supported and verdict.tensorflow is not None:
        warnings.warn(UnsupportedVersionsWarning(
            f"{verdict.describe()}. Training with tfguard may fail or misreport; the range and what was tested on "
            f"each pair: docs/versions.md. Try: {verdict.fix}"), stacklevel=2)
    return verdict


__all__ = ["KERAS_FLOOR_OF_TENSORFLOW", "KERAS_RANGE", "TENSORFLOW_DISTRIBUTIONS", "TENSORFLOW_RANGE", "PairVerdict",
           "UnsupportedVersionsWarning", "installed_pair", "installed_version", "judge_pair", "specifier",
           "supported_range", "warn_if_unsupported"]
