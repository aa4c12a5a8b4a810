"""Forensics: quarantine of a bad batch, replay and localization."""

from tfguard._forensics.quarantine import Quarantine, load_quarantine, save_quarantine
from tfguard._forensics.replay import ReplayReport, StoredReplayWarning, definitions, replay

__all__ = ["Quarantine", "ReplayReport", "StoredReplayWarning", "definitions", "load_quarantine",
           "replay", "save_quarantine"]
