"""The symptom vocabulary and the `Finding` a diagnosis rule returns.

A finding names one symptom of one run: what was seen (`message`), when it
started (`onset_step`, `onset_epoch`), where (`where`: a layer or variable,
or `None` for the whole model), the numbers behind it (`evidence`) and what
to try (`suggestion`). The ids in `SYMPTOMS` are part of tfguard's public
API: new ids may be added, none is ever renamed.

Example:

>>> from tfguard.diagnose import Finding
>>> f = Finding("dead_relu", "warning", "82% of units of 'dense' are dead",
...             onset_step=40, where="dense", evidence={"dead_fraction": 0.82})
>>> f.to_dict()["where"]
'dense'
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tfguard.errors import ContractError

#: The symptom ids, each with the one-line meaning shown in reports.
SYMPTOMS: dict[str, str] = {
    "nonfinite": "a loss, gradient or weight became NaN or Inf",
    "exploding_gradient": "gradient norms grow by orders of magnitude",
    "vanishing_gradient": "gradients of the first layers are vanishingly small",
    "dead_relu": "most units of a ReLU layer output zero for every example",
    "saturated_activation": "most pre-activations of a sigmoid/tanh layer lie in its flat tails",
    "oscillating_loss": "the training loss swings up and down instead of decreasing",
    "slow_convergence": "the training loss decreases, but far too slowly",
    "no_learning": "the training loss does not decrease at all",
    "overfitting": "the validation loss rises while the training loss falls",
    "loss_activation_mismatch": "the loss does not fit the output activation",
    "unnormalized_input": "the input features are far from a normalized scale",
    "label_range": "labels lie outside the range the loss and output accept",
    "pipeline_order": "the input pipeline's order of operations is wrong (e.g. no shuffle before batch)",
}

#: Severities, from the mildest to the worst.
SEVERITIES: tuple[str, ...] = ("info", "warning", "error")


def severity_rank(severity: str) -> int:
    """The position of `severity` in `SEVERITIES` (0 = info)."""
    return SEVERITIES.index(severity)


def _plain(value: Any) -> Any:
    """Turns numpy scalars and nested containers into plain Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


@dataclasses.dataclass(frozen=True)
class Finding:
    """One symptom found in one run.

    Args:
        id: the symptom id, a key of `SYMPTOMS` (or a new id a custom rule
            introduces).
        severity: one of `"info"`, `"warning"`, `"error"`.
        message: one sentence saying what was seen, with numbers.
        onset_step: the global step at which the symptom started, when the
            logs know steps. Defaults to `None`.
        onset_epoch: the 0-based epoch at which it started, when known.
            Defaults to `None`.
        where: the layer or variable concerned, `None` for the whole run.
            Defaults to `None`.
        evidence: the numbers behind the finding (plain floats and ints).
            Defaults to `{}`.
        suggestion: what to try first. Defaults to `""`.

    Raises:
        ContractError: if `severity` is not a known severity or `id` is empty.
    """

    id: str
    severity: str
    message: str
    onset_step: int | None = None
    onset_epoch: int | None = None
    where: str | None = None
    evidence: dict = dataclasses.field(default_factory=dict)
    suggestion: str = ""

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ContractError(
                "Received an invalid value for `severity`, expected one of "
                f"{SEVERITIES}. Received: severity={self.severity!r}"
            )
        if not isinstance(self.id, str) or not self.id:
            raise ContractError(
                f"Received an invalid value for `id`, expected a symptom id. Received: id={self.id!r}"
            )
        for name in ("onset_step", "onset_epoch"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, int(value))
        object.__setattr__(self, "evidence", _plain(dict(self.evidence)))

    def onset_text(self) -> str:
        """`"epoch E, step S"` (what is known of the onset), or `"-"`."""
        parts = []
        if self.onset_epoch is not None:
            parts.append(f"epoch {self.onset_epoch}")
        if self.onset_step is not None:
            parts.append(f"step {self.onset_step}")
        return ", ".join(parts) or "-"

    @property
    def key(self) -> tuple[str, str | None]:
        """`(id, where)`: what makes two findings the same symptom."""
        return (self.id, self.where)

    def to_dict(self) -> dict:
        """The finding as a JSON-ready dict (non-finite numbers kept as floats)."""
        return {
            "id": self.id,
            "severity": self.severity,
            "message": self.message,
            "where": self.where,
            "evidence": dict(self.evidence),
            "suggestion": self.suggestion,
            "onset_step": self.onset_step,
            "onset_epoch": self.onset_epoch,
        }


def fmt(value: float) -> str:
    """A short human form of a number for messages, e.g. `3.2e-05` or `0.82`."""
    if value is None:
        return "n/a"
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 1e4 or abs(value) < 1e-3:
        return f"{value:.2e}"
    return f"{value:.3g}"
