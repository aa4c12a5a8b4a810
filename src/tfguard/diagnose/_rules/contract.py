"""Rule `loss_activation_mismatch`: the loss does not fit the model's output layer.

Reads the model description that tfguard's logger stores as JSON in the text
tag `config/model` (`tfguard.lint.describe_model`) and judges each output
with the rule table `tfguard lint` applies to the live model
(`tfguard._losses.MISMATCH_RULES`): the same codes and severities. These are
the classic combinations that train badly without an error (DeepDiagnosis
lists a wrong loss or last-layer activation among its root causes; Keras
itself only warns for some): probabilities passed as logits (a double
softmax), logits passed as probabilities (Keras clips them into
[eps, 1 - eps]), a softmax over one unit (always 1.0), a single unit for
sparse categorical cross-entropy, a softmax under binary cross-entropy, a
ReLU under a cross-entropy. When the training loss is also flat, the
evidence says so.

The loss must also fit the task, which the targets tell (issue 22): class
ids 0..K-1 fed to a regression loss on a K-unit softmax, or to a binary
cross-entropy on a K-unit head, are a classification task given the wrong
loss; real-valued regression targets outside what the output activation
reaches (a softmax or sigmoid on a standardized target) are a regression
given a classifier's output. These findings carry
`evidence["explains_labels"]`: the labels out of the loss's range
(`label_range`) are then the consequence, listed after this cause.

Example:

>>> from tfguard.diagnose import Signals, Thresholds
>>> from tfguard.diagnose._rules.contract import loss_activation_mismatch
>>> model = {"output_units": 1, "output_activation": "softmax",
...          "loss": {"class": "BinaryCrossentropy", "from_logits": False}, "layers": []}
>>> loss_activation_mismatch(Signals(model=model), Thresholds())[0].severity
'error'
"""

from __future__ import annotations

import numpy as np

from tfguard import _tags
from tfguard._findings import Finding, fmt
from tfguard._losses import described_loss, output_mismatches, resolved_kind
from tfguard.diagnose._inputs.signals import MissingSignals, Signals, missing
from tfguard.diagnose._rules.base import loss_kind, output_activation, output_units
from tfguard.diagnose._rules.invariants import evidence_of, records
from tfguard.diagnose._thresholds import Thresholds

_PROBABILITIES = {"softmax", "sigmoid"}


def _targets(signals: Signals):
    """`(min, max, integer_valued, step, epoch)` of the logged targets, or `None`."""
    lo, hi = signals.series(_tags.LABEL_MIN), signals.series(_tags.LABEL_MAX)
    if lo is None or hi is None:
        return None
    values = np.r_[lo.values, hi.values]
    values = values[np.isfinite(values)]
    if not len(values):
        return None
    step, epoch = lo.at(int(np.argmax(np.isfinite(lo.values))))
    return (float(values.min()), float(values.max()), bool(np.all(np.mod(values, 1) == 0)),
            step, epoch)


def _task_problems(signals: Signals, kind, act: str, units):
    """Yields `(severity, message, suggestion, code)` where the loss does not fit the task the targets show."""
    from tfguard.diagnose._rules.data import ACTIVATION_RANGE

    seen = _targets(signals)
    if seen is None:
        return
    low, high, integer, _, _ = seen
    span = f"[{low:.3g}, {high:.3g}]"
    class_ids = integer and low >= 0 and high > 1 and (units or 0) > 1 and high <= (units or 0) - 1
    if kind == "regression" and act in _PROBABILITIES and class_ids:
        yield ("error", f"a regression loss on the probabilities of a {units}-unit {act}, with class "
               f"ids {int(low)}..{int(high)} as targets: the task is classification and the loss "
               "compares a class id with a probability",
               "Use `loss='sparse_categorical_crossentropy'` with class ids (or "
               "`categorical_crossentropy` with one-hot targets).", "regression_loss_on_classifier")
        return
    if kind == "binary" and class_ids:
        yield ("error", f"binary cross-entropy on a {units}-unit head, with class ids "
               f"{int(low)}..{int(high)} as targets: the task is multi-class",
               "Use `loss='sparse_categorical_crossentropy'` with a softmax output of one unit "
               "per class.", "binary_loss_multiclass")
        return
    if kind == "regression" and act in ACTIVATION_RANGE:
        reach = ACTIVATION_RANGE[act]
        if (low < reach[0] - 1e-6 or high > reach[1] + 1e-6) and not integer:
            yield ("error", f"a regression loss on a {act} output, which only reaches "
                   f"[{reach[0]:.3g}, {reach[1]:.3g}], while the targets span {span}: the output "
                   "activation does not fit the task",
                   "Use a linear output (`activation=None`) for a regression target, or scale "
                   "the targets into the activation's range.", "output_range")


def _multi_hot(signals: Signals):
    """`(what was seen, step, epoch, evidence)` when the targets' rows sum to more than 1, else `None`.

    From the label row sums the logger records, or from the firewall's
    `probabilities` check refusing the targets of a categorical loss.
    """
    rows = signals.series(_tags.LABEL_ROW_SUM_MAX)
    if rows is not None:
        finite = rows.values[np.isfinite(rows.values)]
        if len(finite) and float(finite.max()) > 1.0 + 1e-3:
            step, epoch = rows.at(int(np.argmax(rows.values > 1.0 + 1e-3)))
            return (f"label rows sum to up to {float(finite.max()):.3g}", step, epoch,
                    {"label_row_sum_max": float(finite.max())})
    events = [e for e in signals.guard_events
              if e.get("stage") == "data" and e.get("check") == "probabilities"]
    if events:
        return ("the firewall's probabilities check refused the target rows of "
                f"{len(events)} batch(es)", events[0].get("step"), events[0].get("epoch"),
                {"guard_events": len(events)})
    return None


def _rewards_out_of_range(signals: Signals) -> list[Finding]:
    """The finding of a failed `loss_domain` invariant record (`tfguard.invariants._loss_domain`):
    the loss at the model's predictions is lower than anywhere inside the labels' range."""
    try:
        failed = [r for r in records(signals, "loss_domain") if r.get("ok", True) is False]
    except MissingSignals:
        return []
    if not failed:
        return []
    record = failed[0]
    e = record.get("evidence") or {}
    layers = signals.layer_order()
    where = layers[-1] if layers else record.get("where")
    name = described_loss(signals.model.get("loss")).name if signals.model else None
    low, high = fmt(e.get("label_min")), fmt(e.get("label_max"))
    loss = signals.series(_tags.train("loss"))
    reached = ""
    if loss is not None and np.isfinite(loss.values).any():
        lowest = float(np.nanmin(loss.values))
        if lowest < float(e.get("best_in_range", 0.0)):
            reached = f"; the training loss reached {fmt(lowest)}"
    step = record.get("step")
    return [Finding(
        "loss_activation_mismatch", "error",
        f"{name or 'The loss'}: at the model's predictions on a training batch the loss is "
        f"{fmt(e.get('loss'))}, lower than any prediction inside the labels' range [{low}, {high}] "
        f"scores (at best {fmt(e.get('best_in_range'))}, with {e.get('best_probe', 'the labels')}); "
        f"{fmt(100 * float(e.get('outside_fraction', 0)))} % of the outputs lie outside that range "
        f"(from {fmt(e.get('prediction_min'))} to {fmt(e.get('prediction_max'))}){reached}. The loss "
        "rewards outputs outside the range it is written for, and training pushes them there.",
        where=where, onset_step=step,
        onset_epoch=record.get("epoch") if record.get("epoch") is not None else signals.epoch_of(step),
        evidence={**evidence_of(e), "code": "loss_rewards_out_of_range"},
        suggestion=f"Give the output layer an activation whose range is the labels' [{low}, {high}] "
        "(`activation='sigmoid'`, or `'softmax'` for one-hot rows), or map the output into that "
        "range inside the loss before scoring it.",
    )]


def loss_activation_mismatch(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports a loss that does not fit the output layer.

    From the model description (the rule table), and from the `loss_domain`
    invariant record: a loss (a hand-written one, which the table cannot
    read) that scores the model's out-of-range predictions below anything
    inside the labels' range.

    Args:
        signals: the run, with its model description (`signals.model`).
        thresholds: unused (the contract holds or not).

    Returns:
        One finding per mismatch, onset at the first step (at the record's
        step for the `loss_domain` one).

    Raises:
        MissingSignals: without a model description naming the loss and output activation,
            and without a failed `loss_domain` record.
    """
    del thresholds
    domain = _rewards_out_of_range(signals)
    try:
        return domain + _described_mismatches(signals)
    except MissingSignals:
        if domain:
            return domain
        raise


def _described_mismatches(signals: Signals) -> list[Finding]:
    """The findings of the model description: the rule table, the targets, multi-hot labels."""
    if not signals.model:
        raise MissingSignals(missing(signals, "model description", "text tag config/model"))
    kind, logits = loss_kind(signals)
    act = output_activation(signals)
    if kind is None or act is None:
        raise MissingSignals("the model description names no loss or no output activation")
    units = output_units(signals)
    kind = resolved_kind(kind, units)
    layers = signals.layer_order()
    where = layers[-1] if layers else None
    loss = signals.series(_tags.train("loss"))
    evidence = {"output_units": units if units is not None else -1, "from_logits": int(bool(logits))}
    if loss is not None and len(loss) >= 2 and np.isfinite(loss.values).all():
        evidence["loss_relative_drop"] = float(1 - loss.values.min() / max(loss.values[0], 1e-12))
    name = described_loss(signals.model.get("loss")).name or kind
    findings = []
    multi_hot = (_multi_hot(signals) if act == "softmax"
                 and kind in ("categorical", "divergence", "binary", "regression") else None)
    if multi_hot is not None:
        seen, step, epoch, extra = multi_hot
        findings.append(Finding(
            "loss_activation_mismatch", "error",
            f"{name}: the targets are multi-hot ({seen}) but the output is a softmax, whose rows "
            "always sum to 1: it cannot score two labels at once.", where=where,
            onset_step=step if step is not None else 0, onset_epoch=epoch if epoch is not None else 0,
            evidence={**evidence, **extra, "code": "multi_hot_softmax"},
            suggestion="For a multi-label problem use one sigmoid unit per label "
            "(`activation='sigmoid'`) and binary cross-entropy.",
        ))
    for severity, what, fix, code in _task_problems(signals, kind, act, units):
        findings.append(Finding(
            "loss_activation_mismatch", severity, f"{name}: {what}.", where=where,
            onset_step=0, onset_epoch=0, suggestion=fix,
            evidence={**evidence, "code": code, "explains_labels": 1},
        ))
    task_named = bool(findings)
    for head, head_where in _outputs(signals, where):
        for mismatch in output_mismatches(*head):
            if task_named and mismatch.severity != "error":
                continue  # the targets already named the loss and what to use instead
            findings.append(Finding(
                "loss_activation_mismatch", mismatch.severity, mismatch.message, where=head_where,
                onset_step=0, onset_epoch=0, suggestion=mismatch.suggestion,
                evidence={**evidence, "code": mismatch.code},
            ))
    return findings


def _outputs(signals: Signals, where: str | None) -> list[tuple[tuple, str | None]]:
    """Each output of the description as `output_mismatches` arguments, with where to report it.

    A model with one output is described by the top-level fields (reported at
    its last layer); one with several lists `"outputs"` (reported by name).
    """
    model = signals.model
    outputs = model.get("outputs")
    if not outputs:
        loss = described_loss(model.get("loss"))
        return [((loss.name, loss.kind, loss.from_logits, output_activation(signals),
                  output_units(signals), model.get("output_activation_source")), where)]
    found = []
    for i, output in enumerate(outputs):
        loss = described_loss(output.get("loss"))
        source = output.get("activation_source",
                            model.get("output_activation_source") if i == 0 else None)
        found.append(((loss.name, loss.kind, loss.from_logits, output.get("activation"),
                       output.get("units"), source), output.get("name")))
    return found
