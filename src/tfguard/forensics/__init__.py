"""Forensics: quarantine of a bad batch, replay and localization.

Example:

>>> from tfguard.forensics import replay, load_quarantine
"""

from tfguard.forensics.quarantine import Quarantine, load_quarantine, save_quarantine
from tfguard.forensics.replay import ReplayReport, StoredReplayWarning, definitions, replay

__all__ = ["Quarantine", "ReplayReport", "StoredReplayWarning", "definitions", "load_quarantine",
           "replay", "save_quarantine"]
