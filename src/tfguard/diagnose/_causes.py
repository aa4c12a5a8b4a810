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

>>> from tfguard._findings import Finding
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

from tfguard._findings import Finding, fmt, severity_rank

#: Invariants of a correct program (`tfguard.invariants`). The program's structure (a loss
#: without labels, a trained teacher, outputs mixed across the batch, training mode at
#: inference) is listed first; the training's state (variables no gradient reaches, an output
#: that collapsed) comes after the data and configuration causes, which can produce it (dead
#: ReLUs from a rate far too high) and are then named as its cause.
PROGRAM_INVARIANTS = ("labels_ignored", "trained_unused", "batch_dependence", "training_mode_leak")
STATE_INVARIANTS = ("untrained_variable", "collapsed_output")
INVARIANTS = PROGRAM_INVARIANTS + STATE_INVARIANTS

#: Program, data and configuration problems, in the order they are listed (first: most fundamental).
CAUSES = (*PROGRAM_INVARIANTS, "bad_record", "label_range", "loss_activation_mismatch", "unnormalized_input", "initialization",
          "learning_rate", "pipeline_order", "python_in_pipeline", *STATE_INVARIANTS)

#: What each cause can produce.
EXPLAINS = {
    "labels_ignored": {"no_learning", "slow_convergence", "oscillating_loss", "overfitting"},
    "untrained_variable": {"no_learning", "slow_convergence", "vanishing_gradient", "dead_relu"},
    "trained_unused": {"overfitting"},
    "batch_dependence": {"oscillating_loss", "slow_convergence", "no_learning", "overfitting"},
    "training_mode_leak": {"overfitting", "oscillating_loss"},
    "collapsed_output": {"no_learning", "slow_convergence"},
    "bad_record": {"nonfinite", "exploding_gradient", "oscillating_loss", "no_learning", "slow_convergence",
                   "unnormalized_input", "collapsed_output"},
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
    "initialization": {"nonfinite", "exploding_gradient", "dead_relu", "saturated_activation",
                       "vanishing_gradient", "no_learning", "slow_convergence", "oscillating_loss",
                       "learning_rate", "collapsed_output", "untrained_variable"},
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
#: What initializers far too narrow for their depth produce (`rules.initialization.narrow_initialization`):
#: a signal that shrinks layer after layer, so gradients that vanish, ReLUs that stay at 0, an output
#: that does not depend on the input, no learning (not a NaN, an oscillation or a slow descent)
_NARROW_INIT_EXPLAINS = {"vanishing_gradient", "dead_relu", "collapsed_output", "no_learning",
                         "untrained_variable"}
#: `unnormalized_input` from a few input values tens of times the input's scale (`tfguard.lint._outliers`):
#: what rows far out produce (an overflow, a loss that jumps or stalls), not a run that learns slowly
EXTREME_OUTLIERS = "extreme_outliers"
_OUTLIER_EXPLAINS = {"nonfinite", "exploding_gradient", "oscillating_loss", "no_learning"}
_LOW_RATE_EXPLAINS = {"no_learning", "slow_convergence", "vanishing_gradient"}
#: `pipeline_order` from `validation_split` over class-sorted labels (tfguard.lint._validation_split)
HELD_OUT_CLASSES = "validation_classes_held_out"
_HELD_OUT_EXPLAINS = {"overfitting", "no_learning", "slow_convergence", "oscillating_loss"}

#: What a training symptom can produce in turn: listed after it when it started no later.
SYMPTOM_EXPLAINS = {
    "exploding_gradient": {"nonfinite", "oscillating_loss", "no_learning", "dead_relu",
                           "saturated_activation"},
    "oscillating_loss": {"no_learning", "slow_convergence"},
    "dead_relu": {"vanishing_gradient", "no_learning", "slow_convergence", "untrained_variable",
                  "collapsed_output"},
    "saturated_activation": {"vanishing_gradient", "no_learning", "slow_convergence", "collapsed_output"},
    "vanishing_gradient": {"no_learning", "slow_convergence", "untrained_variable", "collapsed_output"},
}


def kind(finding: Finding) -> str:
    """The finding's place in the cause order: its id, or `"initialization"` for an initializer far too
    wide or far too narrow."""
    if finding.evidence.get("code") == "initialization":
        return "initialization"
    return finding.id


def because(cause: Finding) -> str:
    """The cause as a short clause: "inputs reach 255", "SGD's learning rate is 0.05", ..."""
    e = cause.evidence
    if cause.id == "unnormalized_input" and e.get("code") == EXTREME_OUTLIERS:
        return (f"feature {e['feature']} of the input reaches {fmt(e['peak'])}, {fmt(e['ratio_to_rms'])}x "
                "the input's scale" if "peak" in e and "ratio_to_rms" in e else "a few inputs are extreme")
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
    if cause.id == "bad_record":
        return f"records of the data ('{cause.where}') are bad" if cause.where else "records of the data are bad"
    if cause.id == "label_range":
        if "label_min" in e and "label_max" in e:
            return f"labels span [{fmt(e['label_min'])}, {fmt(e['label_max'])}]"
        return "labels are out of range"
    if cause.id == "loss_activation_mismatch":
        return "the loss does not fit the output activation"
    if kind(cause) == "initialization" and e.get("direction") == "narrow":
        where = f" from '{cause.where}' on" if cause.where else ""
        return (f"the kernel initializers{where} ({e.get('initializer', 'their kernel initializer')}) "
                f"shrink the signal to {fmt(e['signal_factor'])}" if "signal_factor" in e else
                f"the kernel initializers{where} are far too narrow")
    if kind(cause) == "initialization":
        where = f" of '{cause.where}'" if cause.where else ""
        return f"the initializer{where} ({e.get('initializer', 'its kernel initializer')}) is far too wide"
    if cause.id == "pipeline_order":
        if e.get("code") == HELD_OUT_CLASSES:
            return "the validation split holds classes training (almost) never sees"
        return "batches arrive unshuffled"
    if cause.id == "exploding_gradient":
        return "the gradients exploded" + (f" in layer '{cause.where}'" if cause.where else "")
    if cause.id == "oscillating_loss":
        return "the loss oscillates"
    if cause.id == "dead_relu":
        return f"layer '{cause.where}' is dead" if cause.where else "ReLU layers are dead"
    if cause.id == "vanishing_gradient":
        return "the gradients vanish on their way down to " + (
            f"layer '{cause.where}'" if cause.where else "the first layers")
    if cause.id == "saturated_activation":
        return f"layer '{cause.where}' is saturated" if cause.where else "activations are saturated"
    if cause.id == "python_in_pipeline":
        return "a pipeline stage runs Python"
    if cause.id in _INVARIANT_CLAUSES:
        where = f" ('{cause.where}')" if cause.where else ""
        return _INVARIANT_CLAUSES[cause.id] + where
    return cause.id.replace("_", " ")


def _explains(cause: Finding, symptom: Finding) -> bool:
    if kind(cause) == "initialization" and cause.evidence.get("direction") == "narrow":
        return symptom is not cause and symptom.id in _NARROW_INIT_EXPLAINS
    if kind(cause) == "initialization":
        return symptom is not cause and (
            symptom.id in EXPLAINS["initialization"]
            and not (symptom.id == "learning_rate" and symptom.evidence.get("direction") == "low"))
    if cause.id == "loss_activation_mismatch" and symptom.id == "label_range":
        # a loss that does not fit the task the targets show puts those targets out of its range
        return bool(cause.evidence.get("explains_labels"))
    if (cause.id == "loss_activation_mismatch" and cause.severity == "error"
            and symptom.id == "learning_rate" and symptom.evidence.get("direction") == "low"):
        return True  # an output that cannot learn (a softmax over 1 unit) gets no updates to make
    if cause.id == "unnormalized_input" and cause.evidence.get("code") == EXTREME_OUTLIERS:
        return symptom.id in _OUTLIER_EXPLAINS
    if cause.id == "learning_rate" and cause.evidence.get("direction") == "low":
        return symptom.id in _LOW_RATE_EXPLAINS
    if cause.id == "pipeline_order" and cause.evidence.get("code") == HELD_OUT_CLASSES:
        return symptom.id in _HELD_OUT_EXPLAINS  # a validation loss on classes never trained on
    return symptom.id in EXPLAINS.get(cause.id, set())


def _place(finding: Finding) -> float:
    """The finding's place among the causes: its kind's index in `CAUSES`, except that a learning
    rate far outside its optimizer's usual range (`far_above_default`) that training showed to be
    too high comes before the inputs' scale. Both multiply the step a weight takes; a rate 50x
    its default is the one to change first (SGD(0.5) on features of 0-210 diverges, SGD(0.01) on
    the same features trains), while an ordinary rate on raw inputs leaves the inputs first."""
    if (finding.id == "learning_rate" and finding.severity != "info"
            and finding.evidence.get("far_above_default") and finding.evidence.get("direction") == "high"):
        return CAUSES.index("unnormalized_input") - 0.5
    return CAUSES.index(kind(finding))


def _produces(a: Finding, b: Finding) -> bool:
    """Symptom `a` can produce symptom `b`, and started no later."""
    if b.id not in SYMPTOM_EXPLAINS.get(a.id, set()) or a.severity == "info":
        return False
    if a.onset_step is not None and b.onset_step is not None:
        return a.onset_step <= b.onset_step
    return True


def _by_onset(symptoms: list[Finding], rank) -> list[Finding]:
    """Symptoms in rank order, except that one another symptom produces comes after it."""
    left, ordered = list(symptoms), []
    while left:
        roots = [f for f in left if not any(o is not f and _produces(o, f) for o in left)]
        pick = min(roots or left, key=rank)
        ordered.append(pick)
        left.remove(pick)
    return ordered


def by_cause(findings: list[Finding]) -> list[Finding]:
    """Causes first (most fundamental first), then the symptoms, each linked to what explains it."""
    def rank(f: Finding):
        onset = f.onset_step if f.onset_step is not None else 2**62
        return (-severity_rank(f.severity), onset)

    symptoms = sorted((f for f in findings if kind(f) not in CAUSES), key=rank)
    causes = []
    for cause in (f for f in findings if kind(f) in CAUSES):
        if cause.evidence.get("needs_symptom") and cause.severity == "info":
            states = [f for f in findings if f.id in STATE_INVARIANTS]
            shown = [s for s in symptoms + states if s.severity != "info" and _explains(cause, s)]
            if shown:  # a suspect configuration, and training shows what it produces
                cause = dataclasses.replace(
                    cause, severity="warning",
                    message=f"{cause.message.rstrip('.')}; training shows what it produces "
                            f"({', '.join(dict.fromkeys(s.id for s in shown))}).")
        causes.append(cause)
    causes.sort(key=lambda f: (_place(f), rank(f)))
    # a cause another cause produces (labels out of the range of a loss that does not fit the
    # task) is that cause's consequence: listed after it, linked to it
    # (when two could produce each other, the more fundamental one, first in CAUSES, stays)
    def demotes(o: Finding, c: Finding) -> bool:
        return o is not c and o.severity != "info" and _explains(o, c) and (
            not _explains(c, o) or CAUSES.index(kind(o)) < CAUSES.index(kind(c)))

    # the training's state (untrained variables, a collapsed output) stays among the causes, named
    # after the cause that produces it, unless a symptom produced it (a dead layer's bias gets no
    # gradient): then it follows that symptom
    produced = [c for c in causes if c.id not in STATE_INVARIANTS and any(demotes(o, c) for o in causes)]
    produced += [c for c in causes if c.id in STATE_INVARIANTS
                 and not any(r is not c and r.severity != "info" and _explains(r, c) for r in causes)
                 and any(_produces(s, c) for s in symptoms)]
    causes = [c for c in causes if c not in produced]
    # "the learning rate is far too low" is false when nothing could learn anyway (an output
    # that cannot move gets no updates): such a finding is dropped, not listed as a consequence
    produced = [c for c in produced
                if not (c.id == "learning_rate" and c.evidence.get("direction") == "low")]
    # the training's state (variables no gradient reaches, an output that collapsed) is linked
    # to a cause listed before it that can produce it
    causes = [_link(c, [r for r in causes[:i] if r.severity != "info" and _explains(r, c)])
              if c.id in STATE_INVARIANTS else c for i, c in enumerate(causes)]
    symptoms = _by_onset(sorted(produced + symptoms, key=rank), rank)
    linked = []
    for symptom in symptoms:
        reasons = [c for c in causes if c.severity != "info" and _explains(c, symptom)]
        if not reasons:  # else the earlier symptom that produced it
            reasons = [o for o in linked if _produces(o, symptom)][:1]
        linked.append(_link(symptom, reasons))
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


def by_measured_fix(findings: list[Finding], trials) -> list[Finding]:
    """Where remedies were tried (`--try-fixes`), the finding whose remedy measured best comes first.

    A measured improvement is stronger evidence of the cause than any
    ordering rule: the finding answered by the trial with the largest
    relative gain (verdict `"improved"`) moves to the front, its evidence
    gains `measured_fix` and `measured_gain`; the others keep their order.

    Example:

    >>> from types import SimpleNamespace as T
    >>> a, b = Finding("dead_relu", "warning", "dead."), Finding("oscillating_loss", "warning", "swings.")
    >>> trial = T(finding="oscillating_loss", where=None, verdict="improved", before=0.65, after=0.09,
    ...           change="SGD learning_rate 0.5 -> 0.05")
    >>> [f.id for f in by_measured_fix([a, b], [trial])]
    ['oscillating_loss', 'dead_relu']

    Args:
        findings: the findings in report order.
        trials: objects (or dicts) with `finding`, `where`, `verdict`, `before`, `after`, `change`.

    Returns:
        The findings, the measured winner first.
    """
    def field(t, name):
        return t.get(name) if isinstance(t, dict) else getattr(t, name, None)

    best, gain = None, 0.0
    for t in trials or []:
        before, after = field(t, "before"), field(t, "after")
        if field(t, "verdict") != "improved" or not isinstance(before, (int, float)) \
                or not isinstance(after, (int, float)) or before != before or after != after:
            continue
        g = (before - after) / max(abs(before), 1e-12)
        if g > gain:
            best, gain = t, g
    if best is None:
        return list(findings)
    match = [f for f in findings if f.id == field(best, "finding")
             and (field(best, "where") is None or f.where == field(best, "where"))]
    if not match:
        return list(findings)
    winner = match[0]
    moved = dataclasses.replace(
        winner, evidence={**winner.evidence, "measured_fix": str(field(best, "change")),
                          "measured_gain": gain},
        message=f"{winner.message.rstrip()} Measured: {field(best, 'change')} helped most "
                f"({fmt(field(best, 'before'))} -> {fmt(field(best, 'after'))}).")
    return [moved] + [f for f in findings if f is not winner]


__all__ = ["CAUSES", "EXPLAINS", "INVARIANTS", "PROGRAM_INVARIANTS", "STATE_INVARIANTS", "SYMPTOM_EXPLAINS", "because",
           "by_cause", "by_measured_fix"]
