"""The one `Finding` type: what a static check (lint) or a diagnosis rule says about a run.

A finding names one symptom: what was seen (`message`), where (`where`: a
layer, variable, input or dataset op, `None` for the whole model), the
numbers behind it (`evidence`, with a specific sub-code under `"code"`),
what to try (`suggestion`), when it started when steps are known
(`onset_step`, `onset_epoch`) and, for a consequence, which finding caused
it (`cause`). The ids in `SYMPTOMS` are part of tfguard's public API: new
ids may be added, none is ever renamed.

Evidence keeps plain Python numbers (NaN stays a float); `strict_json`
makes any value strict JSON (`"NaN"`, `"Infinity"`), for every report.

Example:

>>> f = Finding("dead_relu", "warning", "82% of units of 'dense' are dead", where="dense",
...             evidence={"dead_fraction": 0.82}, onset_step=40)
>>> f.to_dict()["where"], f.onset_text()
('dense', 'step 40')
>>> strict_json({"bad": float("nan")})
{'bad': 'NaN'}
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from typing import Any

from tfguard._errors import ContractError

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
    "learning_rate": "the learning rate is far too high (or too low) for this model",
    "input_bound": "training waits for its input pipeline more than it computes",
    "python_in_pipeline": "the tf.data pipeline runs Python (py_function, numpy_function, a generator)",
    "labels_ignored": "the loss reads no labels: other labels change neither the loss nor its gradient",
    "untrained_variable": "trainable variables never move: no gradient reaches them",
    "trained_unused": "the optimizer trains variables that inference never reads (a teacher, a discarded head)",
    "batch_dependence": "an example's output at inference changes with the other examples of its batch",
    "training_mode_leak": "inference runs in training mode: Dropout fires or BatchNormalization uses batch statistics in predict/evaluate",
    "collapsed_output": "an output or embedding is the same for every input",
    "bad_record": "records of the data are bad: the firewall rejected their batches at its data check",
    "loss_spike": "a step's loss or gradient norm jumped far above the steps before it (bad records in its batch)",
}

#: The fix for a violation, by the firewall's check stage that failed first (a data check's is in
#: the data; the others', in the model or the optimizer). The firewall's messages and the
#: diagnosis of a guarded run use the same words.
STAGE_FIXES: dict[str, str] = {
    "data": "find the record in your data and drop or impute it (e.g. `np.isfinite(x).all(axis=1)` "
            "finds rows with NaN/Inf; a fingerprint the firewall names is the same example in every "
            "batch it comes back in), or fix the step that produces it upstream",
    "forward": "lower the learning rate, clip the logits before softmax/exp, or use stable ops "
               "(tf.math.divide_no_nan, tf.nn.log_softmax, keras.ops.softmax)",
    "loss": "check the loss inputs: log(0) from probabilities of exactly 0 (use from_logits=True), "
            "or a learning rate that made the outputs overflow",
    "gradients": "lower the learning rate, or clip gradients (e.g. optimizer clipnorm=1.0)",
    "update": "lower the learning rate (the update itself overflowed), or clip gradients "
              "(e.g. optimizer clipnorm=1.0)",
    "spike": "look at the quarantined batch: `tfguard replay PATH` says whether it reproduces and names the "
             "examples that drive the loss (corrupted or mislabelled records); if the run moved to a new "
             "level on purpose (new data, a new loss), guard the model again to start the window over",
}

#: Severities, from the mildest to the worst.
SEVERITIES: tuple[str, ...] = ("info", "warning", "error")


def severity_rank(severity: str) -> int:
    """The position of `severity` in `SEVERITIES` (0 = info)."""
    return SEVERITIES.index(severity)


def worst_severity(findings: Iterable) -> str | None:
    """The highest severity among findings, or `None` for none (e.g. for an exit code)."""
    ranks = [severity_rank(f.severity) for f in findings]
    return SEVERITIES[max(ranks)] if ranks else None


def plain(value: Any) -> Any:
    """Numpy scalars and arrays, tuples and nested containers as plain Python values."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist") and getattr(value, "ndim", 0) > 0:
        return plain(value.tolist())
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def strict_json(value: Any) -> Any:
    """A strict-JSON copy: plain values, NaN/Inf as `"NaN"`/`"Infinity"`, unknowns as text."""
    value = plain(value)
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strict_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def from_strict_json(value: Any) -> Any:
    """Reverses `strict_json` for numbers: `"NaN"`, `"Infinity"`, `"-Infinity"` become floats."""
    if isinstance(value, dict):
        return {k: from_strict_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_strict_json(v) for v in value]
    return _SPECIAL.get(value, value) if isinstance(value, str) else value


@dataclasses.dataclass(frozen=True)
class Finding:
    """One symptom of a model, a pipeline or a run.

    Args:
        id: the symptom id, a key of `SYMPTOMS` (or a new id a custom rule introduces).
        severity: `"info"` (works, but slower or weaker than it should),
            `"warning"` (very likely wrong) or `"error"` (broken as written).
        message: one or two sentences saying what was seen, with numbers.
        where: the layer, variable, input or dataset op; `None` for the
            whole model. Defaults to `None`.
        evidence: the numbers and names behind it; the sub-code under
            `"code"`. Defaults to `{}`.
        suggestion: what to try first. Defaults to `""`.
        onset_step: the global step the symptom started at, when known. Defaults to `None`.
        onset_epoch: the 0-based epoch it started at, when known. Defaults to `None`.
        cause: the `(id, where)` of the finding that most likely caused this
            one (a root cause listed before it). Defaults to `None`.

    Raises:
        ContractError: if `severity` is not a known severity or `id` is empty.
    """

    id: str
    severity: str
    message: str
    where: str | None = None
    evidence: dict = dataclasses.field(default_factory=dict)
    suggestion: str = ""
    onset_step: int | None = None
    onset_epoch: int | None = None
    cause: tuple | None = None

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
        if self.cause is not None:
            object.__setattr__(self, "cause", tuple(self.cause))
        object.__setattr__(self, "evidence", plain(dict(self.evidence or {})))

    @property
    def code(self) -> str | None:
        """The specific sub-code, `evidence["code"]`, or `None`."""
        return self.evidence.get("code")

    @property
    def key(self) -> tuple[str, str | None]:
        """`(id, where)`: what makes two findings the same symptom."""
        return (self.id, self.where)

    def onset_text(self) -> str:
        """`"epoch E, step S"` (what is known of the onset), or `"-"`."""
        parts = []
        if self.onset_epoch is not None:
            parts.append(f"epoch {self.onset_epoch}")
        if self.onset_step is not None:
            parts.append(f"step {self.onset_step}")
        return ", ".join(parts) or "-"

    def to_dict(self) -> dict:
        """The finding as a dict of plain values (`strict_json` it for a JSON file)."""
        return {
            "id": self.id,
            "severity": self.severity,
            "message": self.message,
            "where": self.where,
            "evidence": dict(self.evidence),
            "suggestion": self.suggestion,
            "onset_step": self.onset_step,
            "onset_epoch": self.onset_epoch,
            "cause": list(self.cause) if self.cause is not None else None,
        }

    @classmethod
    def from_dict(cls, values: dict) -> Finding:
        """A finding read back from `to_dict` (or JSON); unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in values.items() if k in names}
        if "evidence" in known:
            known["evidence"] = from_strict_json(known["evidence"])
        return cls(**known)


def event_record(event) -> dict:
    """A firewall violation (`GuardEvent` or its JSON) as the evidence the rules read.

    Example:

    >>> event_record({"step": 3, "stage": "data", "where": "y", "check": "labels",
    ...               "counts": {"bad": 2}})["check"]
    'labels'
    """
    get = event.get if isinstance(event, dict) else (lambda k, d=None: getattr(event, k, d))
    failed = list(get("failed", []) or [])
    check = get("check")
    if check is None:
        message = str(get("message", "") or "")
        found = re.search(r"failed check '([^']+)'", message)
        check = found.group(1) if found else "finite"
    return {
        "step": int(get("step", 0) or 0),
        "batch": get("batch"),
        "epoch": get("epoch"),
        # logs written before check stages were named so call the stage "checkpoint"
        "stage": str(get("stage", None) or get("checkpoint", None) or ""),
        "where": str(get("where", "")),
        "check": str(check),
        "counts": {str(k): float(v) for k, v in dict(get("counts", {}) or {}).items()
                   if isinstance(v, (int, float))},
        "failed": [str(f) for f in failed],
        "action": str(get("action", "")),
        "examples": [dict(row) for row in list(get("examples", []) or []) if isinstance(row, dict)],
    }


OOM_FIXES = (
    "halve the batch size (or the image resolution, or the sequence length)",
    "call keras.backend.clear_session() between models built in one process",
    "let TensorFlow grow GPU memory as needed: "
    "tf.config.experimental.set_memory_growth(gpu, True) (tfguard doctor checks it)",
    "use mixed precision (keras.mixed_precision.set_global_policy('mixed_float16')) on a GPU",
)
"""What to change when training runs out of memory (seed article 003's fixes)."""


def describe_failure(record: dict) -> str:
    """One paragraph for a person, from a `failure_record`.

    Example:

    >>> describe_failure({"status": "failed", "type": "ValueError", "error": "bad shape", "step": 4})
    'training failed at step 4 with ValueError: bad shape'
    """
    at = f" at step {record['step']}" if record.get("step") is not None else ""
    if record.get("status") == "aborted":
        why = f" ({record['error']})" if record.get("error") else ""
        return f"training was interrupted{at}{why}"
    text = f"training failed{at} with {record.get('type')}: {record.get('error')}"
    detail = record.get("detail")
    if record.get("status") == "out_of_memory" and detail:
        parts = []
        if detail.get("batch_size"):
            parts.append(f"batch size {detail['batch_size']}")
        if detail.get("parameters") is not None:
            parts.append(f"{detail['parameters']:,} parameters")
        if detail.get("largest_layer"):
            size = detail.get("largest_activation_mb")
            mb = f" ({size} MB of float32 activations at that batch)" if size is not None else ""
            parts.append(f"largest layer '{detail['largest_layer']}'{mb}")
        text = f"training ran out of memory{at} ({', '.join(parts)}). Fixes: " + "; ".join(
            detail.get("fixes", OOM_FIXES)) + "."
    return text


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


__all__ = ["OOM_FIXES", "SEVERITIES", "SYMPTOMS", "Finding", "describe_failure", "event_record", "fmt", "from_strict_json", "plain", "severity_rank", "strict_json",
           "worst_severity"]
