"""tfguard: trustworthy, observable TensorFlow / Keras 3 training.

Example:

>>> import tfguard
>>> sorted(tfguard.__all__)[:3]
['GuardConfig', 'GuardEvent', 'GuardViolation']
"""

from tfguard import checks
from tfguard.errors import (
    ContractError,
    DataError,
    EventFileError,
    ExportError,
    GuardViolation,
    QuarantineError,
    TfguardError,
)
from tfguard.firewall import (
    GuardConfig,
    GuardEvent,
    GuardWarning,
    guard,
    guard_events,
    instrument,
    unguard,
)
from tfguard.forensics import ReplayReport, load_quarantine, replay

__version__ = "0.1.0"

__all__ = [
    "ContractError",
    "DataError",
    "EventFileError",
    "ExportError",
    "GuardConfig",
    "GuardEvent",
    "GuardViolation",
    "GuardWarning",
    "QuarantineError",
    "ReplayReport",
    "TfguardError",
    "__version__",
    "checks",
    "guard",
    "guard_events",
    "instrument",
    "load_quarantine",
    "replay",
    "unguard",
]
