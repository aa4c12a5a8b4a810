"""Rules on the invariants of a correct program: one rule per invariant check.

`tfguard.invariants` checks, once, what a correct Keras program keeps true
(outputs that do not depend on the batch, inference that is deterministic,
a loss and metrics that read the labels, an optimizer that trains what inference
uses, every trainable variable reached by a gradient, outputs that vary
with their inputs) and writes one record per check as `invariants/records`
(`tags.INVARIANT_RECORDS`): the Logger to the event files, `LiveDiagnosis`
to its history. These rules turn the first failed record of each check into
a finding with its evidence, the layer or variable path and a fix; a run
without records of a check skips its rule.

The checks follow TrainCheck (Jiang et al., "Training with Confidence:
Catching Silent Errors in Deep Learning Training with Automated Proactive
Checks", OSDI 2025), which finds silent errors of PyTorch programs by
checking invariants of correct training within the first iterations.

Example:

>>> import json
>>> from tfguard.diagnose._inputs.signals import Signals
>>> from tfguard.diagnose._thresholds import Thresholds
>>> record = {"check": "labels_ignored", "ok": False, "where": "model", "step": 1, "epoch": 0,
...           "evidence": {"loss": 0.3, "loss_other_labels": 0.3, "relative_change": 0.0}}
>>> s = Signals(texts={"invariants/records": [(1, json.dumps(record))]})
>>> [(f.id, f.severity, f.onset_step) for f in labels_ignored(s, Thresholds())]
[('labels_ignored', 'error', 1)]
"""

from __future__ import annotations

import dataclasses
import functools
import json

from tfguard import _tags
from tfguard._findings import Finding, fmt
from tfguard.diagnose._inputs.signals import MissingSignals, Signals
from tfguard.diagnose._rules.base import accuracy_reached
from tfguard.diagnose._thresholds import Thresholds

LISTED = 5
"""Variables named in a message; the evidence keeps them all."""


def records(signals: Signals, check: str) -> list[dict]:
    """The invariant records of one check, in step order.

    Raises:
        MissingSignals: when the run holds none (the check did not run).
    """
    found = []
    for _step, text in signals.texts.get(_tags.INVARIANT_RECORDS, []):
        try:
            record = json.loads(text)
        except (TypeError, ValueError):
            continue
        if isinstance(record, dict) and record.get("check") == check:
            found.append(record)
    if not found:
        raise MissingSignals(f"no '{check}' invariant record ({_tags.INVARIANT_RECORDS}): "
                             "the check did not run (no tfguard Logger/LiveDiagnosis, or a "
                             "program it does not apply to)")
    return found


def _failed(signals: Signals, check: str) -> dict | None:
    """The first record the check failed; an undecided record (`ok` null: the evidence could
    not tell, `tfguard.invariants._evidence`) is no failure."""
    return next((r for r in records(signals, check) if r.get("ok", True) is False), None)


def evidence_of(record_evidence: dict) -> dict:
    """A record's evidence in the report schema's form: numbers and text only.

    Lists become one comma-separated text (`"a/kernel, a/bias"`), a dict of
    numbers becomes one entry per key (`agreeing_labels/accuracy`).

    Example:

    >>> evidence_of({"count": 2, "variables": ["a/kernel", "a/bias"], "other": {"acc": 0.0}, "x": None})
    {'count': 2, 'variables': 'a/kernel, a/bias', 'other/acc': 0.0}
    """
    found = {}
    for key, value in record_evidence.items():
        if isinstance(value, (int, float, str)):
            found[key] = value
        elif isinstance(value, list):
            found[key] = ", ".join(str(v) for v in value)
        elif isinstance(value, dict):
            found.update({f"{key}/{k}": v for k, v in value.items() if isinstance(v, (int, float, str))})
    return found


def _finding(signals: Signals, record: dict, severity: str, message: str, suggestion: str) -> Finding:
    step = record.get("step")
    epoch = record.get("epoch")
    return Finding(
        record["check"], severity, message, where=record.get("where"),
        evidence=evidence_of(record.get("evidence") or {}),
        suggestion=suggestion, onset_step=step,
        onset_epoch=epoch if epoch is not None else signals.epoch_of(step),
    )


def _names(paths: list) -> str:
    shown = ", ".join(f"'{p}'" for p in paths[:LISTED])
    return shown + (f" and {len(paths) - LISTED} more" if len(paths) > LISTED else "")


def _from_record(check: str):
    """Makes `describe(record, evidence) -> (severity, message, suggestion)` a rule of `check`.

    The rule reports the first failed record of the check (at most one
    finding) and raises `MissingSignals` when the check left no record.
    """
    def wrap(describe):
        @functools.wraps(describe)
        def rule(signals: Signals, thresholds: Thresholds) -> list[Finding]:
            record = _failed(signals, check)
            if record is None:
                return []
            severity, message, suggestion = describe(record, record.get("evidence") or {})
            finding = _finding(signals, record, severity, message, suggestion)
            return _against_the_metric(finding, accuracy_reached(signals, thresholds))
        return rule
    return wrap


def _against_the_metric(finding: Finding, reached: float | None) -> list[Finding]:
    """A state the training's own metric contradicts is no alarm.

    An output "the same for every input" of a classifier whose training
    accuracy reached `satisfied_accuracy` was measured on a batch that could
    not show it: no finding. Variables that did not move in the first epoch
    of such a run are a remark (`info`); weights whose work is thrown away
    (`discarded`) stay a warning, whatever the head learnt alone.
    """
    if reached is None or finding.id not in ("collapsed_output", "untrained_variable"):
        return [finding]
    if finding.id == "collapsed_output":
        return []
    if finding.evidence.get("code") == "discarded":
        return [finding]
    return [dataclasses.replace(
        finding, severity="info", evidence={**finding.evidence, "accuracy_reached": reached},
        message=f"{finding.message} The training accuracy still reached {fmt(reached)}: a remark, "
                "not a warning.")]


@_from_record("training_mode_leak")
def training_mode_leak(record: dict, e: dict) -> tuple[str, str, str]:
    """Inference that runs in training mode: random at inference, or batch statistics.

    A rule (`_from_record`): at most one finding, from the first failed
    record (the check's tolerance is `tfguard.invariants._inference.RELATIVE_TOLERANCE`).
    """
    where = record.get("where")
    if e.get("code") == "batch_statistics":
        return (
            "error",
            f"'{where}' ({e.get('layer_class')}) normalizes with the batch's statistics at "
            f"inference: the outputs of {e.get('examples')} examples change by "
            f"{fmt(100 * e.get('relative_change', 0))}% when they are predicted "
            f"{'alone' if e.get('compared') == 'alone' else 'among other examples'}. "
            "`training=True` is passed to it in `call`, so `predict` and `evaluate` also move "
            "its moving statistics.",
            "Pass the `training` argument of `call` through (`self.bn(x, training=training)`) "
            "instead of a hard-coded `training=True`.")
    known = e.get("known_training_layer")
    return (
        "error" if known else "info",
        f"two identical inference passes disagree by {fmt(100 * e.get('relative_change', 0))}%: "
        f"'{where}' ({e.get('layer_class') or 'the model'}) is random at inference"
        + (" (it is active as in training: `training=True` is hard-coded)." if known else "."),
        "Pass the `training` argument of `call` through to the layer "
        "(`self.dropout(x, training=training)`); if sampling at inference is intended "
        "(a VAE's sampling layer), seed it or ignore this remark."
        if known else "If sampling at inference is not intended, pass `training` through "
        "to the layer that samples.")


@_from_record("batch_dependence")
def batch_dependence(record: dict, e: dict) -> tuple[str, str, str]:
    """An example's output at inference depends on the rest of its batch.

    A rule (`_from_record`): at most one finding, from the first failed
    record of `invariants/records`.
    """
    where = record.get("where")
    how = "alone" if e.get("compared") == "alone" else "with other examples beside them"
    place = (f"in layer '{where}' ({e.get('layer_class')})" if e.get("layer_class")
             else f"in the model's own `call` of '{where}'"
             + (f", after layer '{e['after_layer']}'" if e.get("after_layer") else ""))
    return (
        "error",
        f"the outputs of {e.get('examples')} examples change by "
        f"{fmt(100 * e.get('relative_change', 0))}% when they are predicted {how} instead of "
        f"in their batch of {e.get('batch')}: examples are mixed across the batch {place}.",
        "Look for an op that reduces over axis 0: `ops.tensordot(a, b, 2)` or `ops.sum(...)` "
        "without `axis=-1`, a normalization over `axis=0`, a reshape that folds the batch; "
        "a row-wise dot product is `ops.sum(a * b, axis=-1, keepdims=True)`.")


@_from_record("labels_ignored")
def labels_ignored(record: dict, e: dict) -> tuple[str, str, str]:
    """A loss that never reads the labels.

    A rule (`_from_record`): at most one finding, from the first failed
    record of `invariants/records`.
    """
    if e.get("code") == "metric":
        return (
            "warning",
            f"the metric '{record.get('where')}' ignores the labels: it gives "
            f"{fmt((e.get('agreeing_labels') or {}).get(record.get('where')))} both with labels "
            "that agree with every prediction and with labels that agree with none.",
            "Compute the metric from `y_true` and `y_pred` (a metric function receives "
            "`(y_true, y_pred)` in that order), or log it as a statistic of the predictions.")
    what = "the `compute_loss` override" if e.get("loss_override") else "the compiled loss"
    return (
        "error",
        f"{what} of '{record.get('where')}' ignores the labels: with every label changed the "
        f"loss stays {fmt(e.get('loss'))} and its gradient does not move.",
        "Compute the loss from `y` and `y_pred` (`loss_fn(y, y_pred)`); a loss function "
        "receives `(y_true, y_pred)` in that order.")


@_from_record("trained_unused")
def trained_unused(record: dict, e: dict) -> tuple[str, str, str]:
    """Variables the optimizer trains that the inference pass never reads.

    A rule (`_from_record`): at most one finding, from the first failed
    record of `invariants/records`.
    """
    layers = e.get("layers") or [record.get("where")]
    holders = e.get("freeze") or [record.get("where")]
    attribute = (e.get("attributes") or [None])[0]
    target = f"self.{attribute}" if attribute else holders[0]
    return (
        "warning",
        f"the optimizer trains {e.get('count')} variable(s) ({fmt(e.get('parameters', 0))} "
        f"parameters) that `predict` never reads: {_names(e.get('variables', []))}, in "
        f"{_names(layers)}. A network called only inside the loss (a distillation teacher) "
        "is being changed by training.",
        f"Freeze it before `compile`: `{target}.trainable = False` (or "
        "compute its output under `ops.stop_gradient`); if it is an auxiliary head trained on "
        "purpose, ignore this.")


@_from_record("untrained_variable")
def untrained_variable(record: dict, e: dict) -> tuple[str, str, str]:
    """Trainable variables that never move while the others do.

    A rule (`_from_record`): at most one finding, from the first failed
    record of `invariants/records`.
    """
    needed = e.get("read_at_inference")
    if e.get("code") == "discarded":
        return (
            "warning",
            f"{e.get('count')} of {e.get('trainable')} trainable variables get an exactly zero "
            f"gradient and the output does not depend on them, though `predict` reads them: "
            f"{_names(e.get('variables', []))}. Something after them throws their work away.",
            "Look after these layers for what makes the output independent of them: a "
            "LayerNormalization over a single feature (it outputs its offset whatever comes in: "
            "normalize over more features, or drop it), a multiplication by zero, a tensor "
            "overwritten before it is used.")
    need = (f" {len(needed)} of them feed `predict`." if needed
            else " `predict` does not read them either." if needed is not None else "")
    return (
        "warning",
        f"{e.get('count')} of {e.get('trainable')} trainable variables did not move in the "
        f"first epoch while the others did: {_names(e.get('variables', []))}; no gradient "
        f"reaches them.{need}",
        "Find what cuts the gradient between the loss and these variables: an integer cast "
        "(`ops.cast(x, 'int32')`, `ops.round`, `argmax`) on the path, an `ops.stop_gradient` "
        "in the wrong place, or a branch whose output the loss never uses.")


@_from_record("collapsed_output")
def collapsed_output(record: dict, e: dict) -> tuple[str, str, str]:
    """An output or embedding that is the same for every input.

    A rule (`_from_record`): at most one finding, from the first failed
    record (the check's threshold is `tfguard.invariants._inference.COLLAPSE_SPREAD`).
    """
    return (
        "warning",
        f"the output of '{record.get('where')}' is the same for all {e.get('examples')} "
        f"examples of a batch whose inputs differ: spread {fmt(e.get('spread'))} against a "
        f"magnitude of {fmt(e.get('magnitude'))} over {e.get('features')} feature(s).",
        "A collapsed representation: check for dead units before it (dead_relu), a margin "
        "loss that all-equal embeddings satisfy, or a learning rate that pushed it there; "
        "L2-normalize embeddings and use a margin or contrastive loss with negatives.")


__all__ = ["batch_dependence", "collapsed_output", "evidence_of", "labels_ignored", "records",
           "trained_unused", "training_mode_leak", "untrained_variable"]
