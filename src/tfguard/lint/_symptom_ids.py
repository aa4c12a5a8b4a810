"""The symptom ids the lint checks emit; each check returns `tfguard._findings.Finding`s.

A finding is a statement about a model, a loss, a batch or a `tf.data`
pipeline that was read before training (or at compile/fit time). It is the
very type a diagnosis rule returns, so a report shows both side by side:
`id` is a symptom id from the published vocabulary (`loss_activation_mismatch`,
`label_range`, `unnormalized_input`, `pipeline_order`, `nonfinite`), and the
more specific sub-code lives in `evidence["code"]` (e.g.
`"softmax_with_from_logits"`, `"shuffle_after_batch"`).

Checks never raise for a finding; they return a list of these. Raising is for
arguments a check cannot read at all.

Example:

>>> from tfguard._findings import Finding
>>> f = Finding(
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

# Symptom ids this room emits (a subset of the published vocabulary).
LOSS_ACTIVATION_MISMATCH = "loss_activation_mismatch"
LABEL_RANGE = "label_range"
UNNORMALIZED_INPUT = "unnormalized_input"
PIPELINE_ORDER = "pipeline_order"
NONFINITE = "nonfinite"
PYTHON_IN_PIPELINE = "python_in_pipeline"
INPUT_BOUND = "input_bound"

SYMPTOM_IDS = (
    LOSS_ACTIVATION_MISMATCH,
    LABEL_RANGE,
    UNNORMALIZED_INPUT,
    PIPELINE_ORDER,
    NONFINITE,
    PYTHON_IN_PIPELINE,
)

__all__ = ["INPUT_BOUND", "LABEL_RANGE", "LOSS_ACTIVATION_MISMATCH", "NONFINITE", "PIPELINE_ORDER", "PYTHON_IN_PIPELINE",
           "SYMPTOM_IDS", "UNNORMALIZED_INPUT"]
