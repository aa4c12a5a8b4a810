"""The one shape every lint check returns: `LintFinding`.

A finding is a statement about a model, a loss, a batch or a `tf.data`
pipeline that was read before training (or at compile/fit time). It uses the
same field names as a diagnosis finding so a report can show both side by side:
`id` is a symptom id from the published vocabulary (`loss_activation_mismatch`,
`label_range`, `unnormalized_input`, `pipeline_order`, `nonfinite`), and the
more specific sub-code lives in `evidence["code"]` (e.g.
`"softmax_with_from_logits"`, `"shuffle_after_batch"`).

Checks never raise for a finding; they return a list of these. Raising is for
arguments a check cannot read at all.

Example:

>>> f = LintFinding(
...     id="pipeline_order",
...     severity="warning",
...     message="shuffle is applied after batch.",
...     where="ShuffleDatasetV3 at position 3",
...     evidence={"code": "shuffle_after_batch"},
...     suggestion="Call .shuffle() before .batch().",
... )
>>> f.code, f.to_dict()["severity"]
('shuffle_after_batch', 'warning')
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from tfguard.errors import ContractError

SEVERITIES = ("info", "warning", "error")

# Symptom ids this room emits (a subset of the published vocabulary).
LOSS_ACTIVATION_MISMATCH = "loss_activation_mismatch"
LABEL_RANGE = "label_range"
UNNORMALIZED_INPUT = "unnormalized_input"
PIPELINE_ORDER = "pipeline_order"
NONFINITE = "nonfinite"

SYMPTOM_IDS = (
    LOSS_ACTIVATION_MISMATCH,
    LABEL_RANGE,
    UNNORMALIZED_INPUT,
    PIPELINE_ORDER,
    NONFINITE,
)


def _jsonable(value: Any) -> Any:
    """Turns numpy scalars/arrays, tuples and non-finite floats into JSON values."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "nan", "inf", "-inf": strict JSON has no such numbers
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


@dataclasses.dataclass(frozen=True)
class LintFinding:
    """One problem found by a static check.

    Args:
        id: the symptom id, one of `SYMPTOM_IDS` (more may be added later;
            any non-empty string is accepted).
        severity: one of `"info"`, `"warning"`, `"error"`. `"error"` means
            training is broken as written, `"warning"` that it is very likely
            wrong, `"info"` that it works but is slower or weaker than it
            should be.
        message: one or two sentences stating what is wrong, with the values.
        where: the layer, input, label or dataset op the finding is about.
        evidence: the numbers and names behind the finding; JSON-able, with
            the sub-code under `"code"`. Defaults to `{}`.
        suggestion: the fix to try. Defaults to `""`.

    Raises:
        ContractError: if `severity` is not one of `SEVERITIES` or `id` is
            empty (as `tfguard.diagnose.Finding` does).
    """

    id: str
    severity: str
    message: str
    where: str
    evidence: dict = dataclasses.field(default_factory=dict)
    suggestion: str = ""

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ContractError(
                f"Received an invalid value for `severity`, expected one of {SEVERITIES}. "
                f"Received: severity={self.severity!r}"
            )
        if not isinstance(self.id, str) or not self.id:
            raise ContractError(
                f"Received an invalid value for `id`, expected a non-empty symptom id. "
                f"Received: id={self.id!r}"
            )
        object.__setattr__(self, "evidence", _jsonable(dict(self.evidence or {})))

    @property
    def code(self) -> str | None:
        """The specific sub-code, `evidence["code"]`, or `None`."""
        return self.evidence.get("code")

    def to_dict(self) -> dict:
        """Returns the finding as a JSON-able dict with the six field names."""
        return {
            "id": self.id,
            "severity": self.severity,
            "message": self.message,
            "where": self.where,
            "evidence": self.evidence,
            "suggestion": self.suggestion,
        }


def severity_rank(severity: str) -> int:
    """Returns 0 for info, 1 for warning, 2 for error (for sorting and thresholds)."""
    return SEVERITIES.index(severity)


def worst_severity(findings) -> str | None:
    """Returns the highest severity among findings (`"error"` > `"warning"` > `"info"`).

    Args:
        findings: an iterable of `LintFinding`.

    Returns:
        The severity, or `None` for no findings (e.g. for a CLI exit code).
    """
    ranks = [severity_rank(f.severity) for f in findings]
    return SEVERITIES[max(ranks)] if ranks else None
