"""tfguard: trustworthy, observable TensorFlow / Keras 3 training.

The public API. Names are imported on first use, so `import tfguard` is
cheap and `tfguard doctor` can still report a broken TensorFlow install.
Importing it where the installed TensorFlow / Keras pair is outside the
supported range warns once (`tfguard._versions.UnsupportedVersionsWarning`),
reading only their metadata.

Example:

>>> import tfguard
>>> "guard" in tfguard.__all__ and "Logger" in tfguard.__all__
True
"""

from __future__ import annotations

import importlib

from tfguard._errors import (
    ContractError,
    DataError,
    EventFileError,
    ExportError,
    GuardViolation,
    MissingExtraError,
    QuarantineError,
    SummaryWriteError,
    TfguardError,
    WorkerLostError,
)
from tfguard._versions import warn_if_unsupported

warn_if_unsupported()  # TensorFlow / Keras outside the range tfguard supports: docs/versions.md

__version__ = "0.1.0"

# public name -> the module that defines it
_LAZY = {
    # the firewall
    "checks": "tfguard.checks",
    "guard": "tfguard._firewall",
    "unguard": "tfguard._firewall",
    "guard_events": "tfguard._firewall",
    "guard_step": "tfguard._firewall",
    "GuardedStep": "tfguard._firewall",
    "StepRecord": "tfguard._signals",
    "instrument": "tfguard._firewall",
    "GuardConfig": "tfguard._firewall",
    "SpikeConfig": "tfguard._firewall",
    "GuardEvent": "tfguard._firewall",
    "GuardWarning": "tfguard._firewall",
    "replay": "tfguard._forensics",
    "load_quarantine": "tfguard._forensics",
    "ReplayReport": "tfguard._forensics",
    # logging
    "summary": "tfguard.summary",
    "Logger": "tfguard.summary",
    # reading and diagnosis
    "events": "tfguard.events",
    "read_logdir": "tfguard.events",
    "diagnose": "tfguard.diagnose",
    "diagnose_logdir": "tfguard.diagnose",
    "LiveDiagnosis": "tfguard.diagnose",
    "Finding": "tfguard.diagnose",
    "invariants": "tfguard.invariants",
    "lint": "tfguard.lint",
    "describe_model": "tfguard.lint",
    "attach": "tfguard.attach",
    "run_script": "tfguard.attach",
    "remedies": "tfguard.remedies",
    "try_fixes": "tfguard.remedies",
    # following running jobs
    "watch": "tfguard.watch",
    "watch_logdir": "tfguard.watch",
    # the TensorBoard tab (registered through the tensorboard_plugins entry point)
    "board": "tfguard.board",
    "TfguardPlugin": "tfguard.board",
    # the whole road
    "reference": "tfguard.reference",
    "doctor": "tfguard.doctor",
    "run_doctor": "tfguard.doctor",
}

_SUBMODULES = {"checks", "summary", "events", "diagnose", "lint", "attach", "reference", "doctor",
               "remedies", "invariants", "watch", "board"}

__all__ = [
    "ContractError",
    "DataError",
    "EventFileError",
    "ExportError",
    "GuardViolation",
    "MissingExtraError",
    "QuarantineError",
    "SummaryWriteError",
    "TfguardError",
    "WorkerLostError",
    "__version__",
    *sorted(_LAZY),
]


def __getattr__(name: str):
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'tfguard' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if name in _SUBMODULES else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
