"""The quality firewall: the guarded step around any train step, `guard(model)`, policies."""

from tfguard.firewall.config import GuardConfig
from tfguard.firewall.guard import guard, guard_events, unguard
from tfguard.firewall.instrument import Instrumentation, instrument, instrumentation_of, release
from tfguard.firewall.loop import GuardedStep, guard_step
from tfguard.firewall.policy import GuardEvent, GuardWarning
from tfguard.firewall.spikes import SpikeConfig

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
