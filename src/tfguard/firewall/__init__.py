"""The quality firewall: the guarded train step, `guard(model)`, policies.

Example:

>>> from tfguard.firewall import guard, instrument
"""

from tfguard.firewall.config import GuardConfig, infer_contract
from tfguard.firewall.guard import guard, guard_events, unguard
from tfguard.firewall.instrument import (
    GuardEvent,
    GuardWarning,
    Instrumentation,
    instrument,
    instrumentation_of,
    release,
)

__all__ = [
    "GuardConfig",
    "GuardEvent",
    "GuardWarning",
    "Instrumentation",
    "guard",
    "guard_events",
    "infer_contract",
    "instrument",
    "instrumentation_of",
    "release",
    "unguard",
]
