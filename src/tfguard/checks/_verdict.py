"""The verdict on check results: raise in eager code, assert in a graph, and the usual fix.

`raise_if_failed` turns failed `CheckResult`s into one `GuardViolation`
(eager) or `tf.debugging.Assert` ops (a graph that is never XLA-compiled);
`hint_for` names the usual fix of each check. Contracts and shape checks
share them.

Example:

>>> hint_for("rank")
'reshape the tensor or add/remove a batch axis'
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from tfguard._errors import GuardViolation
from tfguard.checks._base import CheckResult


def raise_if_failed(results: Sequence[CheckResult], context: str):
    """Raises `GuardViolation` for failed results (eager) or returns graph asserts."""
    if not tf.executing_eagerly():
        return tf.group(graph_asserts(results, context))
    values = [{k: np.asarray(v) for k, v in r.tensors().items()} for r in results]
    failed = [(r, v) for r, v in zip(results, values) if not bool(v["ok"])]
    if failed:
        lines = [r.message(v) for r, v in failed]
        first, first_values = failed[0]
        raise GuardViolation(
            f"{context}: " + "; ".join(lines),
            stage="data",
            where=first.target,
            counts={k: v.item() for k, v in first_values.items() if np.ndim(v) == 0},
            hint=hint_for(first.check),
        )
    return None


def graph_asserts(results: Sequence[CheckResult], context: str, index=None) -> list:
    """One `tf.debugging.Assert` per result, for graphs that are never XLA-compiled."""
    ops = []
    for r in results:
        data = [f"GuardViolation: {context}", *([index] if index is not None else [])]
        data += [f"'{r.target}' failed check '{r.check}': bad", r.bad, "of", r.total]
        data += [x for k, v in r.details.items() for x in (k, v)]
        ops.append(tf.debugging.Assert(r.ok, data, summarize=8))
    return ops


_HINTS = {
    "finite": "find where NaN/Inf enters the data (source files, a division, a log) or drop "
    "bad elements with Contract(...).apply(dataset, policy='skip')",
    "range": "scale the inputs (e.g. keras.layers.Rescaling(1/255) for pixels) or widen the range",
    "labels": "check the label encoding against the model's output units",
    "one_hot": "one-hot encode the targets (keras.utils.to_categorical) or use a sparse loss",
    "probabilities": "targets of a categorical loss must be probability rows summing to 1",
    "shape": "fix the producer of the tensor, or the spec if the model really takes that shape",
    "dtype": "cast the tensor (tf.cast) where the dataset is built",
    "rank": "reshape the tensor or add/remove a batch axis",
}


def hint_for(check_name: str) -> str:
    """The usual fix for a failed check, by check name."""
    return _HINTS.get(check_name, "fix the data that violates the check")


__all__ = ["graph_asserts", "hint_for", "raise_if_failed"]
