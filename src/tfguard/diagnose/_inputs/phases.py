"""A run's training phases, as its log says them (`config/phases`).

A model compiled again between its fits (fine-tuning after transfer
learning) trains in one phase per compile; the logger writes the list of
phases (`config/phases`, one JSON object each) whenever a new one begins.
`run_phases` reads the last list back, the same for a log and for the
live history.

Example:

>>> import json
>>> run_phases({"config/phases": [(31, json.dumps([{"phase": 1}, {"phase": 2}]))]})
[{'phase': 1}, {'phase': 2}]
>>> run_phases({})
[]
"""

from __future__ import annotations

import json

from tfguard import _tags


def run_phases(texts: dict) -> list[dict]:
    """The run's phases (`config/phases`, its last value); `[]` for a run of one phase or an unreadable value."""
    found = texts.get(_tags.CONFIG_PHASES, [])
    if not found:
        return []
    try:
        phases = json.loads(found[-1][1])
    except (TypeError, ValueError):
        return []
    return [dict(p) for p in phases if isinstance(p, dict)] if isinstance(phases, list) else []


__all__ = ["run_phases"]
