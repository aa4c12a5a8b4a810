"""The quality firewall: the guarded step around any train step, `guard(model)`, policies."""

from tfguard._firewall.config import GuardConfig
from tfguard._firewall.guard import guard, guard_events, unguard
from tfguard._firewall.instrument import Instrumentation, instrument, instrumentation_of, release
from tfguard._firewall.loop import GuardedStep, guard_step
from tfguard._firewall.policy import GuardEvent, GuardWarning
from tfguard._firewall.spikes import SpikeConfig

__all__ = [
    "GuardConfig",
    "GuardEvent",
    "GuardWarning",
    "GuardedStep",
    "Instrumentation",
    "SpikeConfig",
    "guard",
    "guard_events",
    "guard_step",
    "instrument",
    "instrumentation_of",
    "release",
    "unguard",
]
