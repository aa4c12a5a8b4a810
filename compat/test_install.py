"""tfguard's wheel went into an environment that already held this TensorFlow / Keras pair, as a user's
does: the pair (and everything else already there) is kept, and tfguard runs from the installed wheel."""

from __future__ import annotations

from pathlib import Path

import keras
import tensorflow as tf

import tfguard


def _freeze(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        if "==" in line:
            name, version = line.split("==", 1)
            found[name.strip().lower().replace("_", "-")] = version.strip()
    return found


def test_the_pair_is_the_one_the_environment_held(expected_pair):
    assert (tf.__version__, keras.__version__) == expected_pair


def test_installing_the_wheel_upgraded_or_downgraded_nothing(freeze_dir, expected_pair):
    before, after = _freeze(freeze_dir / "before.txt"), _freeze(freeze_dir / "after.txt")
    assert (before["tensorflow"], before["keras"]) == expected_pair
    changed = {name: (version, after.get(name)) for name, version in before.items() if after.get(name) != version}
    assert changed == {}, f"pip install tfguard changed what the environment held: {changed}"
    assert after["tfguard"] == tfguard.__version__


def test_tfguard_runs_from_the_installed_wheel(freeze_dir):
    site = Path(tf.__file__).parent.parent  # where pip put TensorFlow
    assert Path(tfguard.__file__).parent == site / "tfguard"
    assert (site / "tfguard" / "board" / "static" / "index.js").is_file()  # the tab's package data
