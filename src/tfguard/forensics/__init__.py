"""Forensics: quarantine of a bad batch, replay and localization."""

from tfguard.forensics.quarantine import Quarantine, load_quarantine, save_quarantine
from tfguard.forensics.replay import ReplayReport, definitions, replay, replay_saved

__all__ = ["Quarantine", "ReplayReport", "definitions", "load_quarantine", "replay", "replay_saved",
           "save_quarantine"]
