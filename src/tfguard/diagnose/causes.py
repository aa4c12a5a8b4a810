"""Root cause first: order findings by cause, and say which cause explains each consequence.

A suspect configuration reported as `info` with `evidence["needs_symptom"]`
(a learning rate 300x its optimizer's default) becomes a warning when a
symptom it explains was found, and stays a remark otherwise.

The first line a user reads should be the cause (inputs that reach 255, a
learning rate far too high, a loss that does not fit the output), not what
it produced (a NaN loss, dead ReLUs, no learning). `by_cause` puts the
violated invariants of the program's structure (`PROGRAM_INVARIANTS`: a loss
that ignores the labels, outputs mixed across the batch, ...) first, then the
data and configuration findings, then the invariants of the training's state
(`STATE_INVARIANTS`: a collapsed output, variables no gradient reaches; linked
to a data or configuration cause listed before them that can produce them),
then the training symptoms; a symptom that
a listed cause can produce gets that cause (`Finding.cause`) and its message
says so: "... most likely because inputs reach 255 and SGD's learning rate
is 0.05".

Example:

>>> from tfguard.findings import Finding
>>> nan = Finding("nonfinite", "error", "'batch/loss' became NaN at step 4.", onset_step=4)
>>> lr = Finding("learning_rate", "error", "the loss jumped.", onset_step=3,
...              evidence={"learning_rate": 0.05, "direction": "high"})
>>> ordered = by_cause([nan, lr])
>>> [f.id for f in ordered], ordered[1].cause
(['learning_rate', 'nonfinite'], ('learning_rate', None))
>>> ordered[1].message
"'batch/loss' became NaN at step 4, most likely because the learning rate is 0.05."
"""

from __future__ import annotations

import dataclasses

from tfguard.findings import Finding, fmt, severity_rank

#: Invariants of a correct program (`tfguard.invariants`). The program's structure (a loss
#: without labels, a trained teacher, outputs mixed across the batch, training mode at
#: inference) is listed first; the training's state (variables no gradient reaches, an output
#: that collapsed) comes after the data and configuration causes, which can produce it (dead
#: ReLUs from a rate far too high) and are then named as its cause.
PROGRAM_INVARIANTS = ("labels_ignored", "trained_unused", "batch_dependence", "training_mode_leak")
STATE_INVARIANTS = ("untrained_variable", "collapsed_output")
INVARIANTS = PROGRAM_INVARIANTS + STATE_INVARIANTS

#: Program, data and configuration problems, in the order they are listed (first: most fundamental).
CAUSES = (*PROGRAM_INVARIANTS, "label_range", "loss_activation_mismatch", "unnormalized_input", "learning_rate",
          "pipeline_order", "python_in_pipeline", *STATE_INVARIANTS)

#: What each cause can produce.
EXPLAINS = {
    "labels_ignored": {"no_learning", "slow_convergence", "oscillating_loss", "overfitting"},
    "untrained_variable": {"no_learning", "slow_convergence", "vanishing_gradient", "dead_relu"},
    "trained_unused": {"overfitting"},
    "batch_dependence": {"oscillating_loss", "slow_convergence", "no_learning", "overfitting"},
    "training_mode_leak": {"overfitting", "oscillating_loss"},
    "collapsed_output": {"no_learning", "slow_convergence"},
    "label_range": {"nonfinite", "no_learning", "slow_convergence", "oscillating_loss",
                    "exploding_gradient", "collapsed_output"},
    "loss_activation_mismatch": {"nonfinite", "no_learning", "slow_convergence", "dead_relu",
                                 "saturated_activation", "oscillating_loss", "vanishing_gradient",
                                 "collapsed_output", "untrained_variable"},
    "unnormalized_input": {"nonfinite", "exploding_gradient", "dead_relu", "saturated_activation",
                           "no_learning", "slow_convergence", "oscillating_loss",
                           "collapsed_output", "untrained_variable"},
    "learning_rate": {"nonfinite", "exploding_gradient", "dead_relu", "saturated_activation",
                      "no_learning", "slow_convergence", "oscillating_loss",
                      "collapsed_output", "untrained_variable"},
    "pipeline_order": {"oscillating_loss", "no_learning", "slow_convergence"},
    "python_in_pipeline": {"input_bound"},
}
_INVARIANT_CLAUSES = {
    "labels_ignored": "the loss ignores the labels",
    "untrained_variable": "no gradient reaches some trainable variables",
    "trained_unused": "training changes variables inference never reads",
    "batch_dependence": "outputs depend on the rest of the batch",
    "training_mode_leak": "inference runs in training mode",
    "collapsed_output": "the output is the same for every input",
}
_LOW_RATE_EXPLAINS = {"no_learning", "slow_convergence", "vanishing_gradient"}


def because(cause: Finding) -> str:
    """The cause as a short clause: "inputs reach 255", "SGD's learning rate is 0.05", ..."""
    e = cause.evidence
    if cause.id == "unnormalized_input":
        if "max" in e:
            return f"inputs reach {fmt(e['max'])}"
        return "the inputs are not normalized"
    if cause.id == "learning_rate":
        rate = e.get("learning_rate")
        what = f"{e['optimizer']}'s learning rate" if e.get("optimizer") else "the learning rate"
        if isinstance(rate, (int, float)) and rate == rate:
            return f"{what} is {fmt(rate)}"
        return f"{what} is far too {'low' if e.get('direction') == 'low' else 'high'}"
    if cause.id == "label_range":
        if "label_min" in e and "label_max" in e:
            return f"labels span [{fmt(e['label_min'])}, {fmt(e['label_max'])}]"
        return "labels are out of range"
    if cause.id == "loss_activation_mismatch":
        return "the loss does not fit the output activation"
    if cause.id == "pipeline_order":
        return "batches arrive unshuffled"
    if cause.id == "python_in_pipeline":
        return "a pipeline stage runs Python"
    if cause.id in _INVARIANT_CLAUSES:
        where = f" ('{cause.where}')" if cause.where else ""
        return _INVARIANT_CLAUSES[cause.id] + where
    return cause.id.replace("_", " ")


def _explains(cause: Finding, symptom: Finding) -> bool:
    if cause.id == "learning_rate" and cause.evidence.get("direction") == "low":
        return symptom.id in _LOW_RATE_EXPLAINS
    return symptom.id in EXPLAINS.get(cause.id, set())


def by_cause(findings: list[Finding]) -> list[Finding]:
    """Causes first (most fundamental first), then the symptoms, each linked to what explains it."""
    def rank(f: Finding):
        onset = f.onset_step if f.onset_step is not None else 2**62
        return (-severity_rank(f.severity), onset)

    symptoms = sorted((f for f in findings if f.id not in CAUSES), key=rank)
    causes = []
    for cause in (f for f in findings if f.id in CAUSES):
        if cause.evidence.get("needs_symptom") and cause.severity == "info":
            states = [f for f in findings if f.id in STATE_INVARIANTS]
            shown = [s for s in symptoms + states if s.severity != "info" and _explains(cause, s)]
            if shown:  # a suspect configuration, and training shows what it produces
                cause = dataclasses.replace(
                    cause, severity="warning",
                    message=f"{cause.message.rstrip('.')}; training shows what it produces "
                            f"({', '.join(dict.fromkeys(s.id for s in shown))}).")
        causes.append(cause)
    causes.sort(key=lambda f: (CAUSES.index(f.id), rank(f)))
    causes = [_link(c, [r for r in causes[:i] if r.severity != "info" and _explains(r, c)])
              if c.id in STATE_INVARIANTS else c for i, c in enumerate(causes)]
    linked = []
    for symptom in symptoms:
        linked.append(_link(symptom, [c for c in causes
                                      if c.severity != "info" and _explains(c, symptom)]))
    return causes + linked


def _link(finding: Finding, reasons: list[Finding]) -> Finding:
    """The finding with its first reason as `cause` and "most likely because ..." in its message."""
    if not reasons or finding.cause is not None:
        return finding
    clause = " and ".join(dict.fromkeys(because(c) for c in reasons[:2]))
    message = finding.message.rstrip()
    message = message[:-1] if message.endswith(".") else message
    return dataclasses.replace(finding, cause=reasons[0].key,
                               message=f"{message}, most likely because {clause}.")


__all__ = ["CAUSES", "EXPLAINS", "INVARIANTS", "PROGRAM_INVARIANTS", "STATE_INVARIANTS", "because", "by_cause"]
