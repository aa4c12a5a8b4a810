"""Invariants of a correct training program, checked once, on the model's own functions.

Silent bugs leave the loss curve plausible and nothing NaN: a teacher
trained by a distillation loss, an output that depends on the rest of its
batch, a representation that collapsed, Dropout left on at inference, a
loss that never reads the labels, a branch that never gets a gradient.
TrainCheck (Jiang et al., OSDI 2025) finds such errors in PyTorch by
checking invariants of correct training; this room does it for Keras, with
a few eager passes on the first batch and a fingerprint of the weights,
so a healthy run pays nothing per step.

Each check has a symptom id of the public vocabulary (`tfguard._findings.SYMPTOMS`):

====================  ==========================================================
`training_mode_leak`  two identical inference passes disagree, or a
                      BatchNormalization layer normalizes with batch statistics
`batch_dependence`    an example's output changes with the rest of its batch
`labels_ignored`      other labels change neither the loss nor its gradient
                      (or a compiled metric's value)
`trained_unused`      the optimizer moves variables that inference never reads
`untrained_variable`  trainable variables never move while the others do
`collapsed_output`    an output or embedding is the same for every input
====================  ==========================================================

A check whose evidence cannot tell (non-finite outputs, a batch without
weight, a loss at a point where it does not depend on the label, an output
that does not move) records `ok=None` with the reason
(`tfguard.invariants._evidence`), and the rules make no finding from it.

`watch(model)` runs them at a fit's start, after its first step and at
epoch ends; `tfguard.summary.Logger` and `tfguard.diagnose.LiveDiagnosis`
listen to it, and the `tfguard.diagnose` rules turn its records into findings.

Example:

>>> import keras, numpy as np
>>> from tfguard.invariants import batch_independence
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
>>> x = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
>>> batch_independence(model, x)["ok"]
True
>>> batch_independence(model, np.ones((8, 3), "float32"))["evidence"]["undecided"][:40]
"the model's output is the same for every"
"""

from tfguard.invariants._inference import batch_independence, collapse, determinism
from tfguard.invariants._labels import labels_read
from tfguard.invariants._variables import Fingerprints, trained_unused, untrained
from tfguard.invariants._watch import InvariantWatch, forget, watch, watch_of

__all__ = ["Fingerprints", "InvariantWatch", "batch_independence", "collapse", "determinism",
           "forget", "labels_read", "trained_unused", "untrained", "watch", "watch_of"]
