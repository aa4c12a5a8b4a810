"""The reference road's optional packages, imported when a command first needs one.

The core of tfguard (firewall, logging, diagnosis, reports, the TensorBoard
tab) installs with `pip install tfguard`; the road's data and export checks
need scikit-learn (the digits data set, the stratified split) and
ai-edge-litert (the TFLite interpreter), which `pip install 'tfguard[road]'`
brings. `road_module` imports one of them, or raises `MissingExtraError`
naming what needed it and the install that fixes it.

Example:

>>> road_module("sklearn.model_selection", "the train/test split").__name__
'sklearn.model_selection'
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from tfguard._errors import MissingExtraError

ROAD_EXTRA = "road"
"""`pip install 'tfguard[road]'` (pyproject.toml: `[project.optional-dependencies]`)."""

ROAD_PACKAGES = {"sklearn": "scikit-learn", "ai_edge_litert": "ai-edge-litert"}
"""The top-level module of each package of the road extra, and the distribution that installs it."""

__all__ = ["ROAD_EXTRA", "ROAD_PACKAGES", "road_module"]


def road_module(module: str, needed_for: str) -> ModuleType:
    """Imports `module` of one of the road's optional packages.

    Args:
        module: a module of a package in `ROAD_PACKAGES`, e.g. `"sklearn.datasets"`.
        needed_for: what needs it, as a user reads it, e.g. `"the digits data set"`.

    Returns:
        The module.

    Raises:
        MissingExtraError: its package is not installed (a failing import
            inside an installed package propagates as it is).
    """
    top = module.split(".")[0]
    package = ROAD_PACKAGES[top]
    try:
        importlib.import_module(top)
    except ModuleNotFoundError as e:
        if e.name != top:  # the package is there; something it imports is not
            raise
        raise MissingExtraError(
            f"{needed_for} needs {package} (module `{top}`), which is not installed in this environment "
            f"({sys.executable}); the core of tfguard installs without it.",
            extra=ROAD_EXTRA, package=package,
            hint=f"pip install 'tfguard[{ROAD_EXTRA}]' (or only: pip install {package})",
        ) from e
    return importlib.import_module(module)
