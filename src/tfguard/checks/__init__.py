"""Declarative, composable tensor checks that compute flags, never raise in-graph.

Example:

>>> import tensorflow as tf
>>> from tfguard import checks
>>> checks.check(tf.constant([0.1, 0.9]), checks.finite(), checks.in_range(0, 1), name="p")
>>> checks.check(tf.constant([0.1, 1.5]), checks.finite(), checks.in_range(0, 1), name="p")
Traceback (most recent call last):
...
tfguard._errors.GuardViolation: check of 'p': p failed check 'range': 1 of 2 values outside [0, 1] (received min 0.1, max 1.5)
Try: ...
"""

from tfguard.checks._base import Check, CheckResult
from tfguard.checks._contract import Contract, check, infer_contract, leaves
from tfguard.checks._labels import labels, one_hot, probabilities
from tfguard.checks._shapes import shape, shapes
from tfguard.checks._values import dtype, finite, in_range, predicate, rank
from tfguard.checks._verdict import hint_for

__all__ = [
    "Check",
    "CheckResult",
    "Contract",
    "check",
    "dtype",
    "finite",
    "hint_for",
    "in_range",
    "infer_contract",
    "labels",
    "leaves",
    "one_hot",
    "predicate",
    "probabilities",
    "rank",
    "shape",
    "shapes",
]
