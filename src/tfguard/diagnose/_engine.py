"""`diagnose`: run the rules over one run's signals and gather a `Diagnosis`.

The same pure rules serve the offline reader (`diagnose_logdir`) and the
live callback (`LiveDiagnosis`). A rule that lacks its signals is not run:
it is listed in `rules_skipped` with the reason, so a report of a stock
Keras log says, e.g., that no gradient rule ran because no gradient norm was
logged. A rule that crashes is listed there too (with the error), never
hiding the other rules' findings. Once a run has died (its loss or gradient
norm NaN/Inf for good), only `nonfinite` reads what comes after: every
other statistic of a NaN network is meaningless (a NaN layer looks "dead").

Example:

>>> from tfguard.diagnose import Signals, diagnose
>>> d = diagnose(Signals.from_arrays({"train/loss": (None, [2.3, 2.3, 2.3, 2.3, 2.3])}))
>>> [f.id for f in d.findings], "exploding_gradient" in d.skipped_ids
(['no_learning'], True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import numpy as np

from tfguard import _tags
from tfguard._errors import ContractError
from tfguard._findings import Finding, describe_failure, severity_rank
from tfguard.diagnose._causes import INVARIANTS, by_cause
from tfguard.diagnose._inputs.phases import run_phases
from tfguard.diagnose._inputs.signals import MissingSignals, Signals, death_point
from tfguard.diagnose._rules import RULES, Rule
from tfguard.diagnose._rules.base import own_losses
from tfguard.diagnose._thresholds import Thresholds

_LOWER_IS_BETTER = ("loss", "error", "mse", "mae", "mape", "msle", "crossentropy", "hinge",
                    "divergence", "poisson", "cosh")


def lower_is_better(metric: str) -> bool:
    """True for loss-like metric names (`loss`, `mae`, ...), False for `accuracy`, `auc`, ..."""
    name = metric.rsplit("/", 1)[-1].lower()
    return any(word in name for word in _LOWER_IS_BETTER)


@dataclasses.dataclass
class Diagnosis:
    """The diagnosis of one run.

    Args:
        run: the run's name.
        findings: the findings, worst severity first, then by onset.
        rules_run: ids of the rules that ran.
        rules_skipped: `{"id", "reason"}` for each rule that could not run.
        hparams: the run's hyperparameters.
        metrics: per epoch-level tag (`train/loss`, `val/accuracy`, ...):
            `{"final", "best", "best_epoch", "best_step", "mode"}`.
        source: `"tfguard"`, `"keras"`, `"live"` or `"memory"`.
        notes: remarks on the logs (damaged files, ...).
        signals: the signals diagnosed (for plots; not serialized).
        status: how the run ended (`run_status`): completed, failed, out of
            memory, aborted, or no evidence at all.
        phases: the run's training phases when a model was compiled again between its
            fits (`config/phases`): each one's `phase`, `first_step`, `optimizer`,
            `learning_rate`, `trainable_variables`, `trainable_parameters`; `[]` for a run of one phase.
    """

    run: str
    findings: list = dataclasses.field(default_factory=list)
    rules_run: list = dataclasses.field(default_factory=list)
    rules_skipped: list = dataclasses.field(default_factory=list)
    hparams: dict = dataclasses.field(default_factory=dict)
    metrics: dict = dataclasses.field(default_factory=dict)
    source: str = "memory"
    notes: list = dataclasses.field(default_factory=list)
    signals: Signals | None = dataclasses.field(default=None, repr=False, compare=False)
    status: dict = dataclasses.field(default_factory=lambda: {"state": "completed",
                                                              "text": "training completed"})
    phases: list = dataclasses.field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """True only for a completed run where the rules that ran found no warning or error."""
        return self.status.get("state") == "completed" and all(
            f.severity == "info" for f in self.findings)

    @property
    def ids(self) -> list[str]:
        """The symptom ids found, without repeats, in report order."""
        return list(dict.fromkeys(f.id for f in self.findings))

    @property
    def skipped_ids(self) -> list[str]:
        """The ids of the rules that could not run."""
        return [s["id"] for s in self.rules_skipped]

    @property
    def worst(self) -> str | None:
        """The worst severity found, or `None` when there is no finding."""
        if not self.findings:
            return None
        return max((f.severity for f in self.findings), key=severity_rank)

    def by_id(self, symptom: str) -> list[Finding]:
        """The findings of one symptom id."""
        return [f for f in self.findings if f.id == symptom]


def metric_summary(signals: Signals) -> dict:
    """Final and best value of every epoch-level `train/*` and `val/*` series.

    Args:
        signals: the run.

    Returns:
        tag -> `{"final", "best", "best_epoch", "best_step", "mode"}`;
        `mode` is `"min"` for loss-like metrics, else `"max"`; non-finite
        values are ignored for `best`.
    """
    summary = {}
    for tag, s in signals.scalars.items():
        if not _tags.is_metric(tag) or not len(s):
            continue
        mode = "min" if lower_is_better(tag) else "max"
        finite = np.flatnonzero(np.isfinite(s.values))
        entry = {"final": float(s.values[-1]), "best": None, "best_epoch": None,
                 "best_step": None, "mode": mode}
        if len(finite):
            pick = np.argmin if mode == "min" else np.argmax
            i = int(finite[pick(s.values[finite])])
            step, epoch = s.at(i)
            entry.update(best=float(s.values[i]), best_epoch=epoch, best_step=step)
        summary[tag] = entry
    return summary


#: Rules that read the training loss curve: on a model that logs its own losses instead of
#: `loss` (a VAE's `total_loss`, a contrastive model's `c_loss`), they judge those.
CURVE_RULES = frozenset({"no_learning", "slow_convergence", "oscillating_loss", "overfitting",
                         "learning_rate"})
def _as_loss(signals: Signals, name: str) -> Signals:
    """`signals` with the model's own loss `name` read as `loss` (train/, val/, batch/)."""
    scalars = dict(signals.scalars)
    for tag_of in (_tags.train, _tags.val, _tags.batch):
        scalars.pop(tag_of("loss"), None)
        if tag_of(name) in signals.scalars:
            scalars[tag_of("loss")] = signals.scalars[tag_of(name)]
    return dataclasses.replace(signals, scalars=scalars)


def _run_rule(rule: Rule, signals: Signals, th: Thresholds) -> list[Finding]:
    names = own_losses(signals) if rule.id in CURVE_RULES else []
    if not names:
        return rule(signals, th)
    found, missing = [], None
    for name in names:
        try:
            for f in rule(_as_loss(signals, name), th):
                found.append(dataclasses.replace(
                    f, message=f"'{name}': {f.message}", evidence={**f.evidence, "loss": name}))
        except MissingSignals as err:
            missing = err
    if missing is not None and not found and len(names) == 1:
        raise missing
    return found


def _resolve_rules(rules) -> list[Rule]:
    if rules is None:
        return list(RULES.values())
    resolved = []
    for rule in rules:
        if isinstance(rule, Rule):
            resolved.append(rule)
        elif isinstance(rule, str) and rule in RULES:
            resolved.append(RULES[rule])
        else:
            raise ContractError(
                f"Received an unknown rule, expected a `Rule` or one of {list(RULES)}. "
                f"Received: {rule!r}"
            )
    return resolved


def diagnose(
    signals: Signals,
    rules: Iterable[str | Rule] | None = None,
    thresholds: Thresholds | Mapping | None = None,
) -> Diagnosis:
    """Runs the diagnosis rules over one run's signals.

    Example:

    >>> from tfguard.diagnose import Signals, diagnose
    >>> d = diagnose(Signals.from_arrays({"train/loss": (None, [1.0, 0.5, 0.3, 0.2])}),
    ...              rules=["no_learning", "overfitting"])
    >>> d.findings, d.skipped_ids
    ([], ['overfitting'])

    Args:
        signals: the normalized signals of one run.
        rules: rule ids or `Rule` objects to run. Defaults to `None` (all of `RULES`).
        thresholds: a `Thresholds` or a mapping of overrides. Defaults to
            `None` (the documented defaults).

    Returns:
        A `Diagnosis`.

    Raises:
        ContractError: for an unknown rule id or threshold name.
    """
    th = Thresholds.resolve(thresholds)
    findings, run, skipped = [], [], []
    death = death_point(signals)
    alive = signals.truncated(*death) if death is not None else signals
    for rule in _resolve_rules(rules):
        try:
            found = _run_rule(rule, signals if rule.after_death else alive, th)
        except MissingSignals as missing:
            skipped.append({"id": rule.id, "reason": str(missing)})
            continue
        except Exception as err:  # a broken rule must not hide the others
            skipped.append({"id": rule.id, "reason": f"rule failed: {type(err).__name__}: {err}"})
            continue
        run.append(rule.id)
        findings.extend(found)
    return Diagnosis(
        run=signals.run, findings=by_cause(findings), rules_run=run, rules_skipped=skipped,
        hparams=dict(signals.hparams), metrics=metric_summary(signals), source=signals.source,
        notes=list(signals.notes), signals=signals, status=run_status(signals, run, skipped, th),
        phases=run_phases(signals.texts),
    )


def last_step(signals: Signals) -> int | None:
    """The largest global step of any scalar of the run, or `None` when none has a step."""
    known = [int(s.steps.max()) for s in signals.scalars.values() if len(s) and s.steps.max() >= 0]
    return max(known) if known else None


def cut_off(signals: Signals) -> dict | None:
    """The status of a tfguard log that ends without the Logger's end-of-training record.

    The Logger writes `run/status` whenever training ends (completed, failed,
    or stopped by a signal); a log it started (`config/hparams`) that has no
    such record after its last step was cut off: SIGKILL, a crash of the
    interpreter, or a run still going. Such a run is "interrupted at step
    N", never healthy. Logs of other writers (Keras, `tf.summary` by hand),
    which never write the record, are judged on their evidence.

    Returns:
        An `"aborted"` status, or `None` when the log is whole or not the Logger's.
    """
    if signals.source != "tfguard" or _tags.CONFIG_HPARAMS not in signals.texts:
        return None
    record, last = signals.status, last_step(signals)
    if record is not None:
        ended = record.get("step")
        if record.get("status") != "completed" or not isinstance(ended, int) or last is None \
                or ended >= last:
            return None
    at = f" at step {last}" if last is not None else ""
    return {"state": "aborted", "type": "interrupted", "step": last,
            "text": f"training was interrupted{at}: the log ends without the Logger's "
                    "end-of-training record (the process was killed, or is still running)"}


def _missing_what(reason: str) -> str:
    """"no gradient norms (grad_norm/<layer>): ..." -> "gradient norms"."""
    head = reason.split(":", 1)[0].split(" (", 1)[0].strip()
    return head[3:] if head.startswith("no ") else head


def run_status(signals: Signals, rules_run: list, skipped: list | None = None,
               thresholds: Thresholds | None = None) -> dict:
    """How the run ended, as the reports state it before any finding.

    `{"state", "text"}` with `state` one of `"completed"`, `"failed"`,
    `"out_of_memory"`, `"aborted"` (a signal, Ctrl-C, or a log cut off
    before the Logger's end-of-training record: `cut_off`), `"no_evidence"`
    (nothing was logged that a rule could read) or `"little_evidence"`
    (more than `little_evidence_skipped` of the rules could not look: the
    text lists what was missing; never "healthy"; invariant checks and the
    rules without `new_evidence` do not count), plus the failure
    record's fields (`type`, `error`, `step`, `detail`) when training
    failed, and `missing` for little evidence.
    """
    failure = signals.status
    cut = cut_off(signals)
    if cut is not None:
        return cut
    if failure and failure.get("status") != "completed":
        state = failure.get("status") if failure.get("status") in (
            "failed", "out_of_memory", "aborted") else "failed"
        return {"state": state, "text": describe_failure(failure),
                **{k: failure.get(k) for k in ("type", "error", "step", "detail") if k in failure}}
    if not rules_run:
        return {"state": "no_evidence",
                "text": "no signal any rule can read was logged: nothing can be said about this run"}
    th = Thresholds.resolve(thresholds)
    # an invariant check that does not apply to the program (a GAN has no inference call) is
    # not evidence missing about the training, and a rule reading only what others read adds
    # none: only the rules of the run's own kinds of signals count here
    uncounted = {*INVARIANTS, *(rule.id for rule in RULES.values() if not rule.new_evidence)}
    skipped = [s for s in skipped or [] if s["id"] not in uncounted]
    total = len([r for r in rules_run if r not in uncounted]) + len(skipped)
    if total and len(skipped) / total > th.little_evidence_skipped:
        missing = list(dict.fromkeys(_missing_what(s["reason"]) for s in skipped))
        return {"state": "little_evidence", "missing": missing,
                "text": (f"little evidence: training completed, but {len(skipped)} of {total} rules "
                         f"could not look (missing: {'; '.join(missing[:6])}); not called healthy")}
    return {"state": "completed", "text": "training completed"}
