"""The symptom vocabulary and the `Finding` a diagnosis rule returns (`tfguard.findings`).

Lint and diagnosis share one `Finding` type; this module keeps the names
the diagnosis room has always exported.

Example:

>>> from tfguard.diagnose import Finding
>>> f = Finding("dead_relu", "warning", "82% of units of 'dense' are dead",
...             onset_step=40, where="dense", evidence={"dead_fraction": 0.82})
>>> f.to_dict()["where"]
'dense'
"""

from tfguard.findings import SEVERITIES, SYMPTOMS, Finding, fmt, severity_rank

__all__ = ["SEVERITIES", "SYMPTOMS", "Finding", "fmt", "severity_rank"]
