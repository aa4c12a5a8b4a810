"""What a diagnosis rule is, and the small helpers every rule shares.

A rule is a pure function `(signals, thresholds) -> list[Finding]`: it reads
a `Signals`, never writes a file and never prints. When the run lacks what
the rule needs, the rule raises `MissingSignals` with the reason, and
`diagnose` lists the rule under `rules_skipped`.

Example:

>>> import numpy as np
>>> from tfguard.diagnose._rules.base import first_persistent
>>> first_persistent(np.array([False, True, True, True, False]), 3)
1
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from tfguard import _tags
from tfguard._findings import Finding
from tfguard._losses import described_loss, resolved_kind
from tfguard.diagnose._inputs.signals import MissingSignals, Series, Signals
from tfguard.diagnose._thresholds import Thresholds

RuleFn = Callable[[Signals, Thresholds], list[Finding]]


@dataclasses.dataclass(frozen=True)
class Rule:
    """A named diagnosis rule.

    Args:
        id: the symptom id the rule reports.
        fn: the pure function `(signals, thresholds) -> list[Finding]`.
        needs: what signals the rule reads, in words (shown in docs).
        after_death: the rule also reads the signals logged after the run
            died (from the point where losses and gradient norms stay
            NaN/Inf, every statistic is garbage). Defaults to `False`.
        new_evidence: the rule reads a signal no other rule reads, so
            whether it could look counts in how much of the run the rules
            saw (`run_status`'s little evidence). `False` for a rule that
            reads only what others read (`loss_spike`: the batch losses and
            the firewall's records): adding it must not make a run of a
            loss alone look well observed. Defaults to `True`.
    """

    id: str
    fn: RuleFn
    needs: str
    after_death: bool = False
    new_evidence: bool = True

    def __call__(self, signals: Signals, thresholds: Thresholds) -> list[Finding]:
        return self.fn(signals, thresholds)


def first_persistent(mask: np.ndarray, persistence: int) -> int | None:
    """Index of the first run of at least `persistence` consecutive True values.

    Args:
        mask: boolean array.
        persistence: the run length required (at least 1).

    Returns:
        The index where that run starts, or `None`.
    """
    persistence = max(1, int(persistence))
    edges = np.diff(np.concatenate([[0], np.asarray(mask, dtype=np.int8).reshape(-1), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    long_enough = np.flatnonzero(ends - starts >= persistence)
    return int(starts[long_enough[0]]) if len(long_enough) else None


def baseline(values: np.ndarray, points: int) -> float | None:
    """Median of the first `points` finite, positive values, or `None`."""
    good = values[np.isfinite(values) & (values > 0)][: max(1, points)]
    return float(np.median(good)) if len(good) else None


def onset(series: Series, index: int) -> dict:
    """`{"onset_step": ..., "onset_epoch": ...}` of point `index` of `series`."""
    step, epoch = series.at(index)
    return {"onset_step": step, "onset_epoch": epoch}


def finite_epoch_curve(signals: Signals, tag: str) -> Series | None:
    """The finite points of an epoch-level series, one per epoch (last wins)."""
    s = signals.series(tag)
    if s is None:
        return None
    keep = np.isfinite(s.values)
    if not keep.any():
        return None
    steps, values, epochs = s.steps[keep], s.values[keep], s.epochs[keep]
    if np.all(epochs >= 0):
        # one point per epoch: the last logged one
        _, last = np.unique(epochs[::-1], return_index=True)
        idx = np.sort(len(epochs) - 1 - last)
        steps, values, epochs = steps[idx], values[idx], epochs[idx]
    return Series(steps, values, epochs)


def loss_kind(signals: Signals) -> tuple[str | None, bool | None]:
    """The kind of the model's loss (`tfguard._losses.KINDS`) and its `from_logits` flag.

    Read from the model description (`tfguard._losses.described_loss`: its
    `"kind"`, or its name and class in a description written before the
    kind was recorded).

    Returns:
        `(kind, from_logits)`, `(None, None)` when the model description does not name a loss.
    """
    entry = (signals.model or {}).get("loss")
    if not entry:
        return None, None
    loss = described_loss(entry)
    return loss.kind, loss.from_logits


def output_activation(signals: Signals) -> str | None:
    """The model's output activation (`"linear"` for none), or `None` when it could not be read."""
    act = (signals.model or {}).get("output_activation")
    if act is None:
        return None
    return "linear" if act in ("", "None", "linear") else str(act).lower()


def output_units(signals: Signals) -> int | None:
    """The number of output units from the model description, or `None`."""
    units = (signals.model or {}).get("output_units")
    try:
        return int(units) if units is not None else None
    except (TypeError, ValueError):
        return None


#: Loss kinds of a classifier over K classes (one-hot KL divergence is their cross-entropy).
_MULTI_CLASS = ("categorical", "sparse_categorical", "auto_crossentropy", "divergence")


def chance_loss(signals: Signals) -> float | None:
    """The loss of a uniform guess for a cross-entropy model, or `None`.

    `ln(K)` for (sparse) categorical cross-entropy over K classes, `ln(2)`
    for binary cross-entropy: what a freshly initialized classifier scores.
    """
    kind, _ = loss_kind(signals)
    units = output_units(signals)
    kind = resolved_kind(kind, units)
    if kind in _MULTI_CLASS and units and units >= 2:
        return math.log(units)
    if kind == "binary":
        return math.log(2.0)
    return None


def initial_loss(signals: Signals, curve: Series) -> tuple[float, str]:
    """The training loss before training, as well as the logs tell it.

    In order: the first per-batch losses (`batch/loss`) logged in the first
    quarter of epoch 0 (a loss of 0, a batch that carried no weight, left
    out); the chance-level loss of a cross-entropy model; the loss at the
    end of epoch 0.

    Args:
        signals: the run.
        curve: the finite epoch-level training loss.

    Returns:
        `(loss, source)` with source `"batch"`, `"chance"` or `"epoch0"`.
    """
    b = signals.series(_tags.batch("loss"))
    if b is not None:
        first_end = signals.step_of_epoch(0)
        ok = np.isfinite(b.values)
        if first_end is not None:
            ok &= (b.steps >= 0) & (b.steps <= max(1, first_end // 4))
        elif curve.has_steps:
            ok &= (b.steps >= 0) & (b.steps < curve.steps[0])
        else:
            ok &= np.arange(len(b)) < 1
        # a first loss of (nearly) 0 is a batch without weight (all-zero sample weights), not a
        # loss measured before training
        ok &= np.abs(b.values) > 1e-9
        if ok.any():
            return float(np.median(b.values[ok][:3])), "batch"
    chance = chance_loss(signals)
    if chance is not None:
        return chance, "chance"
    return float(curve.values[0]), "epoch0"


def accuracy_curve(signals: Signals) -> Series | None:
    """The finite epoch-level training accuracy (`train/accuracy` or `train/acc`)."""
    for name in ("accuracy", "acc", "sparse_categorical_accuracy", "categorical_accuracy",
                 "binary_accuracy"):
        s = finite_epoch_curve(signals, _tags.train(name))
        if s is not None:
            return s
    return None


def chance_accuracy(signals: Signals) -> float | None:
    """`1 / K`, the accuracy of a uniform guess over the model's K classes (2 for one sigmoid unit)."""
    kind, _ = loss_kind(signals)
    units = output_units(signals)
    kind = resolved_kind(kind, units)
    if kind in _MULTI_CLASS and units and units >= 2:
        return 1.0 / units
    if kind == "binary" and units == 1:
        return 0.5
    return None


def at_chance(signals: Signals, thresholds: Thresholds) -> dict | None:
    """Evidence that the run never did better than a constant prediction, or `None`.

    A classifier at chance: its best epoch-level training accuracy stays
    within `chance_margin` of `1 / K`, or its best training loss stays
    within `chance_margin` (relative) of a uniform guess's (`chance_loss`:
    `ln K`, `ln 2`). Whatever else its curves do (a loss that fell from a
    bad start to `ln 2` "improved"), such a run is hurt.

    Example:

    >>> from tfguard.diagnose import Signals, Thresholds
    >>> model = {"loss": "binary_crossentropy", "output_units": 1}
    >>> s = Signals.from_arrays({"train/accuracy": (None, [0.49, 0.51, 0.497])}, model=model)
    >>> at_chance(s, Thresholds())["best_accuracy"]
    0.51
    """
    acc = accuracy_curve(signals)
    chance = chance_accuracy(signals)
    if acc is not None and chance is not None:
        best = float(np.max(acc.values))
        if best <= chance + thresholds.chance_margin:
            return {"best_accuracy": best, "chance_accuracy": chance}
        return None  # an accuracy above chance says more than a loss
    loss = finite_epoch_curve(signals, _tags.train("loss"))
    uniform = chance_loss(signals)
    if loss is not None and uniform is not None and len(loss):
        best = float(np.min(loss.values))
        if best >= uniform * (1 - thresholds.chance_margin):
            return {"best_loss": best, "chance_loss": uniform}
    return None


def accuracy_reached(signals: Signals, thresholds: Thresholds) -> float | None:
    """The best epoch-level training accuracy when it reaches `satisfied_accuracy`, else `None`.

    A run whose metric climbs to the top is learning: a collapsed output or
    an untrained variable seen in it is no harm to report as one.
    """
    acc = accuracy_curve(signals)
    if acc is None:
        return None
    best = float(np.max(acc.values))
    return best if best >= thresholds.satisfied_accuracy else None


def require_epochs(curve: Series | None, tag: str, thresholds: Thresholds) -> Series:
    """Raises `MissingSignals` unless `curve` has `min_epochs` finite epochs."""
    if curve is None:
        raise MissingSignals(f"no epoch-level {tag}")
    if len(curve) < thresholds.min_epochs:
        raise MissingSignals(
            f"{len(curve)} finite epoch(s) of {tag}, needs {thresholds.min_epochs}"
        )
    return curve


#: Loss names of adversarial training (a GAN's two players do not fall together by design)
#: and of regularizers (a VAE's KL term rises from zero as the latent starts to carry
#: information): not judged as training losses of their own.
_ADVERSARIAL = ("d_", "g_", "disc", "gen", "critic", "adv")
_REGULARIZER = ("kl", "reg", "penalty", "gp")


def own_losses(signals: Signals) -> list[str]:
    """The model's own loss names to judge as training losses, when it logs no `loss`.

    Example:

    >>> from tfguard.diagnose import Signals
    >>> s = Signals.from_arrays({"train/total_loss": (None, [3.0, 2.0]),
    ...                          "train/kl_loss": (None, [0.1, 0.5]),
    ...                          "train/reconstruction_loss": (None, [2.9, 1.5])})
    >>> own_losses(s)
    ['total_loss']
    """
    if signals.series(_tags.train("loss")) is not None:
        return []
    names = [_tags.metric_name(t) for t in signals.scalars
             if t.startswith(_tags.TRAIN) and t.endswith("loss") and signals.series(t) is not None]
    totals = [n for n in names if "total" in n]
    if totals:
        return totals[:1]
    return [n for n in names
            if not n.startswith(_ADVERSARIAL) and not any(w in n for w in _REGULARIZER)]


def run_improving(signals: Signals, thresholds: Thresholds) -> bool:
    """Whether the run shows no harm: every loss finite and falling, validation still improving.

    The principle behind every warning (issue 22): a symptom needs evidence
    that the run is hurt, or will be. A run is improving when every logged
    loss is finite, it is not at chance (`at_chance`), its epoch-level
    training loss (`train/loss`, else the
    model's own losses, `own_losses`) ends at least `nl_min_drop` below
    where it started (`train/loss`: below the loss before training,
    `initial_loss`) and never rises by `osc_rise_rel` from one epoch to the next,
    and its validation loss, when logged, ends `nl_min_drop` below its first
    epoch and within `overfit_rise` of its best.

    Example:

    >>> from tfguard.diagnose import Signals, Thresholds
    >>> s = Signals.from_arrays({"train/loss": (None, [1.0, 0.6, 0.4]), "val/loss": (None, [1.0, 0.7, 0.5])})
    >>> run_improving(s, Thresholds())
    True
    """
    if at_chance(signals, thresholds) is not None:
        return False  # a loss that fell from a bad start to a uniform guess's has learnt nothing
    tags_ = [_tags.train(name) for name in (own_losses(signals) or ["loss"])]
    raw = [signals.series(tag) for tag in signals.scalars
           if tag.startswith((_tags.TRAIN, _tags.VAL, _tags.BATCH)) and tag.endswith("loss")]
    if any(s is not None and not np.isfinite(s.values).all() for s in raw):
        return False
    curves = {tag: finite_epoch_curve(signals, tag) for tag in tags_}
    curves = {tag: c for tag, c in curves.items() if c is not None and len(c) >= 2}
    if not curves:
        return False
    for tag, c in curves.items():
        # from the loss before training (the first batches, or chance) where it is known
        start = initial_loss(signals, c)[0] if tag == _tags.train("loss") else float(c.values[0])
        if float(c.values[-1]) > start - thresholds.nl_min_drop * abs(start):
            return False
        if np.any(np.diff(c.values) > thresholds.osc_rise_rel * np.abs(c.values[:-1])):
            return False  # a loss that jumps back up between epochs is not steadily improving
    val = finite_epoch_curve(signals, _tags.val("loss"))
    if val is not None and len(val) >= 2:
        best, first, final = float(np.min(val.values)), float(val.values[0]), float(val.values[-1])
        if final > best + thresholds.overfit_rise * abs(best):
            return False
        if final > first - thresholds.nl_min_drop * abs(first):
            return False  # validation has not improved since its first epoch
    return True


def remark_when_improving(findings: list[Finding], signals: Signals,
                          thresholds: Thresholds) -> list[Finding]:
    """Warnings become `info` remarks while the run keeps improving (`run_improving`).

    A symptom seen while every loss keeps falling and validation keeps
    improving has no evidence that it hurts the run: it is reported, as a
    remark, with `evidence["run_improving"] = 1`. Errors stay errors, and so
    does a finding whose cause is a configuration error of its own (a
    kernel initializer far too wide, `evidence["code"] == "initialization"`):
    a run that learns despite it still learns worse.
    """
    def soft(f: Finding) -> bool:
        return f.severity == "warning" and f.evidence.get("code") != "initialization"

    if not any(soft(f) for f in findings) or not run_improving(signals, thresholds):
        return findings
    return [dataclasses.replace(
        f, severity="info", evidence={**f.evidence, "run_improving": 1},
        message=f.message.rstrip() + " The run is not hurt (its losses keep falling): a remark, "
        "not a warning.") if soft(f) else f for f in findings]
