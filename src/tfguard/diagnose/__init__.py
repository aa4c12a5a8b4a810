"""Diagnose a training from its signals: symptom rules, live callback, reports.

The rules (`tfguard.diagnose._rules`) are pure functions over a run's
normalized `Signals`, one per symptom id of `SYMPTOMS`; each threshold is a
documented field of `Thresholds`. The same rules run offline over a log
directory (`diagnose_logdir`, tfguard's layout or the stock Keras
callback's) and live during `fit` (`LiveDiagnosis`). Reports: a rich
terminal summary (`render_terminal`), a versioned JSON document (`to_json`,
schema `tfguard.report/1`), one self-contained HTML file (`write_html`), and
a ranking of the runs of a sweep (`compare_logdir`, `render_compare`).

Offline use never imports TensorFlow or Keras: `LiveDiagnosis`, the one
name that needs them, is imported on first use.

The folders say what is inside: `inputs/` (what the rules read: `Signals`
from event files or from memory), `rules/` (one pure function per
symptom), `report/` (terminal, JSON, the HTML page with its `html/`
sections and `plots/`, and `compare/`, everything about a sweep). Beside
them: `engine` (`diagnose`), `offline` (`diagnose_logdir`), `live`
(`LiveDiagnosis`), `causes` (root cause first), `thresholds` and `finding`.

Example:

>>> from tfguard.diagnose import Signals, diagnose
>>> s = Signals.from_arrays({
...     "train/loss": (None, [1.0, 0.7, 0.5, 0.4, 0.3, 0.2, 0.1]),
...     "val/loss": (None, [1.0, 0.8, 0.7, 0.8, 0.9, 1.0, 1.1])})
>>> [(f.id, f.onset_epoch) for f in diagnose(s).findings]
[('overfitting', 3)]
"""

from tfguard._findings import SEVERITIES, SYMPTOMS, Finding
from tfguard.diagnose._engine import Diagnosis, diagnose, metric_summary
from tfguard.diagnose._inputs.logdir import load_signals
from tfguard.diagnose._inputs.normalize import run_family, signals_from_runs
from tfguard.diagnose._inputs.recorder import SignalRecorder
from tfguard.diagnose._inputs.signals import MissingSignals, Series, Signals
from tfguard.diagnose._inputs.violations import Violation, violations
from tfguard.diagnose._offline import diagnose_logdir
from tfguard.diagnose._report.compare.rank import (
    CompareRow,
    compare_diagnoses,
    compare_logdir,
    render_compare,
)
from tfguard.diagnose._report.html_page import render_html, write_html
from tfguard.diagnose._report.json import SCHEMA, to_json
from tfguard.diagnose._report.terminal import render_terminal
from tfguard.diagnose._rules import RULES, Rule
from tfguard.diagnose._thresholds import Thresholds

__all__ = [
    "RULES",
    "SCHEMA",
    "SEVERITIES",
    "SYMPTOMS",
    "CompareRow",
    "Diagnosis",
    "Finding",
    "LiveDiagnosis",
    "MissingSignals",
    "Rule",
    "Series",
    "SignalRecorder",
    "Signals",
    "Thresholds",
    "Violation",
    "compare_diagnoses",
    "compare_logdir",
    "diagnose",
    "diagnose_logdir",
    "load_signals",
    "metric_summary",
    "render_compare",
    "render_html",
    "render_terminal",
    "run_family",
    "signals_from_runs",
    "to_json",
    "violations",
    "write_html",
]

# names that need TensorFlow / Keras, imported on first use
_LAZY = {"LiveDiagnosis": "tfguard.diagnose._live"}


def __getattr__(name: str):
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'tfguard.diagnose' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
