"""`Trial`: one remedy tried, measured against the original run, and judged from the numbers.

`judge` reads what two `Intercept`s recorded (the original run's and the
trial's) and makes a `Trial`: the change made, the measure before and after
(see `tfguard.remedies._measure`), the verdict, and both runs' curves. The
curve of a run is that of its last model (the one the script trained
last), all of its fits in order.

Where a remedy changes what the loss measures (`Remedy.rescore`: new label
values, a new loss), the last epoch's loss of the two runs would measure
different things. Both final models are then scored again with the
remedied loss, on the same data the remedied run was validated on (its
training data when it had no validation): `before` is the original model
on that data, `after` the remedied one, and the measure's name says so
(`val_loss (rescored)`).

A trial whose remedy changed nothing (it did not apply to what the script
built) is `"not applied"`, with the reason in `notes`; it is never a fix.

`Trial.to_dict` is one entry of the JSON report's `trials` list::

    {"remedy": str, "finding": str, "where": str | null,
     "change": str,                       # the line a person would write
     "measure": str,                      # "val_loss", "loss", "... (rescored)"
     "before": number, "after": number,   # NaN/Inf as "NaN"/"Infinity"
     "verdict": "improved" | "no better" | "worse" | "not applied",
     "fix": bool, "margin": number, "epochs": int | null, "run_dir": str | null,
     "curves": {"before": {key: [per epoch]}, "after": {key: [per epoch]}},
     "notes": [str], "seconds": number}

Example:

>>> t = Trial(remedy="clipnorm", finding="exploding_gradient", change="SGD(clipnorm=1.0)",
...           measure="val_loss", before=9.1, after=0.8, verdict="improved")
>>> t.fix, t.to_dict()["verdict"]
(True, 'improved')
"""

from __future__ import annotations

import dataclasses
import math

import keras
import numpy as np
import tensorflow as tf

from tfguard._findings import strict_json
from tfguard.remedies._edits import NotApplicable, sample_dataset
from tfguard.remedies._measure import (
    DEFAULT_MARGIN,
    concat_logs,
    final_value,
    measure_name,
    verdict,
)

EVAL_ROWS = 4096  # the most rows a rescored measure reads


@dataclasses.dataclass
class Trial:
    """One remedy tried.

    Args:
        remedy: the remedy's key.
        finding: the id of the finding it answers.
        change: the change made, in one line (several joined by `"; "`).
        measure: the measure's name (`"val_loss"`, `"loss"`, with
            `" (rescored)"` when both models were scored again).
        before: the original run's measure (NaN when it has none).
        after: the trial's measure (NaN when it has none).
        verdict: `"improved"`, `"no better"`, `"worse"` or `"not applied"`.
        where: the layer the finding names, or `None`. Defaults to `None`.
        margin: the relative margin of the verdict. Defaults to `0.05`.
        epochs: the epochs the trial trained. Defaults to `None`.
        run_dir: the folder of the trial's logs, or `None`. Defaults to `None`.
        curves: `{"before": {key: [per epoch]}, "after": {...}}`. Defaults to `{}`.
        notes: remarks (a remedy that did not apply, a failed script, ...). Defaults to `[]`.
        seconds: the trial's wall time. Defaults to `0.0`.
    """

    remedy: str
    finding: str
    change: str
    measure: str
    before: float
    after: float
    verdict: str
    where: str | None = None
    margin: float = DEFAULT_MARGIN
    epochs: int | None = None
    run_dir: str | None = None
    curves: dict = dataclasses.field(default_factory=dict)
    notes: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def fix(self) -> bool:
        """Whether the numbers show the remedy helped (only `"improved"` is a fix)."""
        return self.verdict == "improved"

    def to_dict(self) -> dict:
        """The trial as strict-JSON-ready plain values."""
        return strict_json({
            "remedy": self.remedy, "finding": self.finding, "where": self.where,
            "change": self.change, "measure": self.measure, "before": self.before,
            "after": self.after, "verdict": self.verdict, "fix": self.fix,
            "margin": self.margin, "epochs": self.epochs, "run_dir": self.run_dir,
            "curves": self.curves, "notes": list(self.notes), "seconds": round(self.seconds, 2),
        })


def run_curve(fits: list) -> tuple[dict, int | None, object]:
    """`(curve, kept index, model)` of the last model trained in a list of `FitCapture`s."""
    if not fits:
        return {}, None, None
    model = fits[-1].model
    own = [f for f in fits if f.model is model]
    epochs, kept = [], None
    for fit in own:
        if fit.kept_epoch is not None:
            kept = len(epochs) + fit.kept_epoch
        elif fit.epochs:
            kept = None
        epochs.extend(fit.epochs)
    return concat_logs(epochs), kept, model


def _value(curve: dict, name: str, kept: int | None, epochs: int | None = None) -> float:
    if kept is not None and kept < len(curve.get(name) or []):
        return float(curve[name][kept])
    return final_value(curve, name, epochs)


def evaluation_data(arguments: dict):
    """`(x, y)` the remedied run was validated on (its training data without validation), or `None`."""
    data = arguments.get("validation_data")
    if data is not None:
        if isinstance(data, (tuple, list)) and len(data) >= 2:
            x, y = data[0], data[1]
        elif isinstance(data, tf.data.Dataset):
            x, y = sample_dataset(data)
        else:
            return None
    else:
        x, y = arguments.get("x"), arguments.get("y")
        if isinstance(x, tf.data.Dataset):
            x, y = sample_dataset(x)
        elif x is None or y is None or isinstance(x, dict):
            return None
        split = float(arguments.get("validation_split") or 0.0)
        if split:
            cut = int(len(x) * (1 - split))
            x, y = x[cut:], y[cut:]
    if y is None or isinstance(x, dict):
        return None
    return np.asarray(x)[-EVAL_ROWS:], np.asarray(y)[-EVAL_ROWS:]


def rescored(original_model, remedied_model, arguments: dict) -> tuple[float, float]:
    """Both models' mean loss under the remedied model's loss, on the remedied run's data."""
    data = evaluation_data(arguments)
    loss = getattr(remedied_model, "loss", None)
    if data is None or loss is None:
        raise NotApplicable("no data or no loss to score both models with")
    loss_fn = keras.losses.get(loss) if isinstance(loss, str) else loss
    x, y = data

    def score(model) -> float:
        predicted, target = np.asarray(model.predict(x, verbose=0, batch_size=256)), y
        if predicted.ndim == target.ndim + 1 and predicted.shape[-1] == 1:  # as a Loss does
            predicted = predicted[..., 0]
        elif target.ndim == predicted.ndim + 1 and target.shape[-1] == 1:
            target = target[..., 0]
        return float(np.mean(keras.ops.convert_to_numpy(loss_fn(target, predicted))))
    return score(original_model), score(remedied_model)


def judge(finding, remedy, original, trial, *, margin: float = DEFAULT_MARGIN,
          run_dir: str | None = None, error: str | None = None, seconds: float = 0.0) -> Trial:
    """The `Trial` of a remedy from the two runs' `Intercept` records.

    Args:
        finding: the `Finding` the remedy answers.
        remedy: the `Remedy`.
        original: the `Intercept` of the original run.
        trial: the `Intercept` of the remedied run.
        margin: the verdict's relative margin. Defaults to `0.05`.
        run_dir: where the trial logged. Defaults to `None`.
        error: how the remedied run failed, if it did. Defaults to `None`.
        seconds: the trial's wall time. Defaults to `0.0`.
    """
    before_curve, before_kept, before_model = run_curve(original.fits)
    after_curve, after_kept, after_model = run_curve(trial.fits)
    name = measure_name(before_curve) if before_curve else measure_name(after_curve)
    notes = list(trial.notes)
    epochs = len(after_curve.get(name) or [])
    # a shortened trial (epochs_fraction) is compared at its own length; one that stopped
    # early on its own (EarlyStopping) is compared with the original's end, as a person would
    shortened = getattr(trial, "epochs_fraction", 1.0) < 1
    fewer = epochs if shortened and epochs < len(before_curve.get(name) or []) else None
    before = _value(before_curve, name, before_kept, fewer)
    after = _value(after_curve, name, after_kept)
    if after_kept is not None:
        notes.append(f"the remedied model kept the weights of epoch {after_kept + 1}: "
                     f"its {name} is that epoch's")
    if fewer is not None:
        notes.append(f"the trial ran {epochs} epoch(s): compared with the original's epoch {epochs}")
    if error:
        notes.append(f"the remedied run failed: {error}")
    shown = name
    if remedy.rescore and trial.changes and before_model is not None and after_model is not None:
        try:
            before, after = rescored(before_model, after_model, trial.fits[-1].arguments)
            shown = f"{'val_loss' if name == 'val_loss' else 'loss'} (rescored)"
            notes.append("both final models scored with the remedied loss on the remedied data")
        except (NotApplicable, ValueError, TypeError, tf.errors.OpError) as reason:
            notes.append(f"could not rescore both models ({reason}); the logged losses compare "
                         "different targets")
    outcome = "not applied" if not trial.changes else verdict(before, after, margin)
    return Trial(
        remedy=remedy.key, finding=finding.id, where=finding.where,
        change="; ".join(trial.changes) or remedy.title, measure=shown,
        before=before if before is not None else math.nan, after=after, verdict=outcome,
        margin=margin, epochs=epochs or None, run_dir=run_dir,
        curves={"before": before_curve, "after": after_curve}, notes=notes, seconds=seconds,
    )


__all__ = ["EVAL_ROWS", "Trial", "evaluation_data", "judge", "rescored", "run_curve"]
