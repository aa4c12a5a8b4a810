"""`lint_model`: the output activation of every head against its loss.

These are the mistakes that make a Keras classifier train badly or not at all
while `fit()` runs without complaint. The rules, their codes and severities
are the one table in `tfguard._losses` (`MISMATCH_RULES`), which the diagnosis
applies to the model description of a run as well.

Measured on sklearn's digits (5 epochs, Adam 0.01, 512 examples, TF 2.21 / Keras
3.15): a linear output into `sparse_categorical_crossentropy` without
`from_logits=True` ends at 20-77 % training accuracy (depending on the
initialization; its loss stays above 2.2) and a ReLU output at 11 %, against
96 % (loss 0.30) when matched; ReLU logits reach 58 %. A softmax output into a
`from_logits=True` loss trains as well as the matched pair *on the TensorFlow
backend*, because Keras's TF backend notices the softmax op in front of the
loss and silently uses its input (with a `UserWarning`); the JAX and PyTorch
backends do not, so both `*_with_from_logits` codes are warnings, not errors.
For the same reason a sigmoid into categorical crossentropy trains as a softmax
classifier on TF while `predict()` returns sigmoids that do not sum to 1.

Every finding has `id="loss_activation_mismatch"`. An activation read from the
last layer of an unbuilt subclassed model is a guess: its errors are reported
as warnings.

Example:

>>> import keras
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
>>> loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
>>> [f.code for f in lint_model(model, loss=loss)]
['softmax_with_from_logits']
"""

from __future__ import annotations

from typing import Any

from tfguard._findings import Finding
from tfguard._losses import output_mismatches
from tfguard.lint._heads import OutputHead, output_heads
from tfguard.lint._losses import LossInfo, losses_per_output
from tfguard.lint._symptom_ids import LOSS_ACTIVATION_MISMATCH


def lint_head(head: OutputHead, loss: LossInfo) -> list[Finding]:
    """Checks one output head against its loss.

    Args:
        head: the output, from `tfguard.lint._heads.output_heads`.
        loss: its loss, from `tfguard.lint._losses.resolve_loss`.

    Returns:
        The findings, each with `id="loss_activation_mismatch"`.
    """
    findings = []
    where = f"output '{head.name}'" + (f" (layer '{head.layer}')" if head.layer else "")
    mismatches = output_mismatches(loss.name, loss.kind, loss.from_logits, head.activation,
                                   head.units, head.source)
    for mismatch in mismatches:
        findings.append(
            Finding(
                id=LOSS_ACTIVATION_MISMATCH,
                severity=mismatch.severity,
                message=mismatch.message,
                where=where,
                evidence={
                    "code": mismatch.code,
                    "output": head.name,
                    "layer": head.layer,
                    "activation": head.activation,
                    "activation_source": head.source,
                    "units": head.units,
                    "loss": loss.name,
                    "loss_class": loss.cls,
                    "from_logits": loss.from_logits,
                },
                suggestion=mismatch.suggestion,
            )
        )
    return findings


def lint_model(model, loss: Any = None) -> list[Finding]:
    """Checks the output activation of a model against its loss.

    Example:

    >>> import keras
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    >>> lint_model(model, loss="binary_crossentropy")
    []

    Args:
        model: a Keras model, compiled or not.
        loss: the loss to check against: a string, function, `Loss` object,
            or a list/dict with one per output. Defaults to `None`, meaning the
            loss the model was compiled with (only structural checks, such as
            a one-unit softmax, run when there is none).

    Returns:
        A list of `Finding` (empty for a matched model and loss).

    Raises:
        TypeError: if `model` is not a `keras.Model` or `loss` is not a loss.
        ValueError: if a list of losses does not have one entry per output.
    """
    heads = output_heads(model)
    if loss is None and getattr(model, "compiled", False):
        loss = getattr(model, "loss", None)
    losses = losses_per_output(loss, [h.name for h in heads])
    findings = []
    for head, info in zip(heads, losses):
        findings.extend(lint_head(head, info))
    return findings
