"""The normalized signals of one run: what every diagnosis rule reads.

Whatever the source (tfguard's logger, the stock `keras.callbacks.TensorBoard`
callback, or the live in-memory history of a training), a run becomes one
`Signals`: scalar series keyed by the tags of `tfguard._tags` (`train/loss`,
`val/accuracy`, `grad_norm/dense_1`, ...), histograms, the hparams, the model
description (the JSON of `config/model`) and the findings of the static
checks (`lint`). Every point of a series carries its global step and its
0-based epoch; either is `-1` when the logs do not say it (the stock Keras
callback writes epoch metrics at the epoch index, not at a step).

Example:

>>> from tfguard.diagnose import Signals
>>> s = Signals.from_arrays({"train/loss": ([10, 20, 30], [2.0, 1.5, 1.2])})
>>> s.series("train/loss").epochs.tolist()
[0, 1, 2]
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping

import numpy as np

from tfguard import _tags

#: Layer classes that put the input on a sane scale inside the model.
NORMALIZING_LAYERS = frozenset(
    {"Rescaling", "Normalization", "BatchNormalization", "LayerNormalization", "GroupNormalization"}
)
#: Layer classes that take ids, strings or categories, whose scale means nothing.
TOKEN_LAYERS = frozenset(
    {"Embedding", "StringLookup", "IntegerLookup", "TextVectorization", "Hashing", "HashedCrossing",
     "CategoryEncoding", "Discretization"}
)

#: Tag prefixes of per-layer series; the rest of the tag is the layer name.
PER_LAYER = {
    "grad_norm": _tags.GRAD_NORM,
    "weight_norm": _tags.WEIGHT_NORM,
    "update_ratio": _tags.UPDATE_RATIO,
    "zero_grad_fraction": _tags.ZERO_GRAD_FRACTION,
    "dead_fraction": _tags.dead_fraction(""),
    "saturated_fraction": _tags.saturated_fraction(""),
}


def missing(signals: Signals, what: str, tags_named: str) -> str:
    """Why a rule could not run, true to where the signals came from.

    Example:

    >>> missing(Signals(source="keras"), "gradient norms", "grad_norm/<layer>")
    'no gradient norms (grad_norm/<layer>): the stock keras.callbacks.TensorBoard callback does not log them; log with tfguard.Logger'
    """
    if signals.source == "keras":
        why = "the stock keras.callbacks.TensorBoard callback does not log them; log with tfguard.Logger"
    elif signals.source in ("tfguard", "live"):
        why = ("this run's log has none (the logger records them on its `scalars_every` schedule; "
               "a run shorter than one period, or scalars_every=0, has none)")
    else:
        why = "they are not among the signals given"
    return f"no {what} ({tags_named}): {why}"


class MissingSignals(Exception):
    """Raised by a rule when the run lacks the signals the rule needs.

    `diagnose` catches it and records the rule under `rules_skipped` with
    the message as the reason.
    """


@dataclasses.dataclass(frozen=True)
class Series:
    """One scalar tag over time, sorted by step (or by epoch when steps are unknown).

    Args:
        steps: int64 global steps, `-1` where unknown.
        values: float64 values (may hold NaN and Inf).
        epochs: int64 0-based epochs, `-1` where unknown.
    """

    steps: np.ndarray
    values: np.ndarray
    epochs: np.ndarray

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def at(self, index: int) -> tuple[int | None, int | None]:
        """`(step, epoch)` of point `index`, each `None` when unknown."""
        step, epoch = int(self.steps[index]), int(self.epochs[index])
        return (step if step >= 0 else None, epoch if epoch >= 0 else None)

    @property
    def has_steps(self) -> bool:
        """True when every point has a known global step."""
        return len(self) > 0 and bool(np.all(self.steps >= 0))

    def x(self) -> tuple[np.ndarray, str]:
        """The x axis to plot this series against: `(steps, "step")` or `(epochs, "epoch")`."""
        if self.has_steps:
            return self.steps, "step"
        return self.epochs, "epoch"


def _natural_key(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def epochs_for(steps: np.ndarray, epoch_end_steps: np.ndarray | None) -> np.ndarray:
    """The 0-based epoch of each step, given the last step of each epoch.

    A step `s` belongs to the first epoch whose last step is `>= s`; a step
    past the last known end belongs to the next (running) epoch.

    Args:
        steps: int64 global steps (`-1` where unknown).
        epoch_end_steps: sorted last step of each epoch, or `None`.

    Returns:
        int64 array of epochs, `-1` where unknown.
    """
    steps = np.asarray(steps, dtype=np.int64)
    if epoch_end_steps is None or len(epoch_end_steps) == 0:
        return np.full(steps.shape, -1, dtype=np.int64)
    epochs = np.searchsorted(np.asarray(epoch_end_steps, dtype=np.int64), steps, side="left")
    return np.where(steps >= 0, epochs, -1).astype(np.int64)


@dataclasses.dataclass
class Signals:
    """The normalized signals of one run.

    Build it with `Signals.from_arrays` (in memory), `signals_from_runs`
    (from `tfguard.events.read_logdir`) or `SignalRecorder` (live).

    Args:
        run: the run's name. Defaults to `"run"`.
        scalars: tag -> `Series`. Defaults to `{}`.
        histograms: tag -> list of `(step, buckets)` with `buckets` a `[k, 3]`
            array of `(left, right, count)`. Defaults to `{}`.
        hparams: the run's hyperparameters. Defaults to `{}`.
        model: the model description (`tfguard.lint.describe_model`), or
            `None`. Defaults to `None`.
        lint: findings of the static checks, each a dict with at least `id`
            and `message` (optionally `severity`, `where`, `suggestion`).
            Defaults to `[]`.
        texts: tag -> list of `(step, text)`. Defaults to `{}`.
        source: where the signals come from: `"tfguard"`, `"keras"`,
            `"live"` or `"memory"`. Defaults to `"memory"`.
        epoch_end_steps: the last global step of each epoch, when known.
            Defaults to `None`.
        notes: remarks on the source (damaged files, running means, ...).
            Defaults to `[]`.
        path: the run directory, when read from disk. Defaults to `None`.
        guard_events: the firewall's violations as evidence (`event_record`
            dicts: step, batch, epoch, stage, where, check, counts).
            Defaults to `[]`.
        status: how training ended when it failed (`run/status`: `status`,
            `type`, `error`, `step`, `detail`), or `None`. Defaults to `None`.
    """

    run: str = "run"
    scalars: dict = dataclasses.field(default_factory=dict)
    histograms: dict = dataclasses.field(default_factory=dict)
    hparams: dict = dataclasses.field(default_factory=dict)
    model: dict | None = None
    lint: list = dataclasses.field(default_factory=list)
    texts: dict = dataclasses.field(default_factory=dict)
    source: str = "memory"
    epoch_end_steps: np.ndarray | None = None
    notes: list = dataclasses.field(default_factory=list)
    path: str | None = None
    guard_events: list = dataclasses.field(default_factory=list)
    status: dict | None = None

    # -- construction ----------------------------------------------------------
    @classmethod
    def from_arrays(
        cls,
        scalars: Mapping[str, tuple],
        *,
        epoch_end_steps: Iterable[int] | None = None,
        **kwargs,
    ) -> Signals:
        """Builds signals from plain `(steps, values)` pairs.

        The epoch of every point is derived from `epoch_end_steps`, else from
        the steps of `train/epoch`, else from the steps of `train/loss`
        (tfguard writes epoch-end scalars at the step that ended the epoch).

        Example:

        >>> s = Signals.from_arrays({"batch/loss": ([1, 2, 3], [1.0, 0.9, 0.8]),
        ...                          "train/loss": ([2, 3], [0.95, 0.8])})
        >>> s.series("batch/loss").epochs.tolist()
        [0, 0, 1]

        Args:
            scalars: tag -> `(steps, values)`; steps may be `None` for
                epoch-indexed series (then the point index is the epoch).
            epoch_end_steps: the last step of each epoch. Defaults to `None`
                (derived as described above).
            **kwargs: the other fields of `Signals`.

        Returns:
            A `Signals`.

        Raises:
            ValueError: if steps and values of a tag differ in length.
        """
        raw: dict[str, tuple[np.ndarray, np.ndarray, bool]] = {}
        for tag, (steps, values) in scalars.items():
            values = np.asarray(values, dtype=np.float64).reshape(-1)
            if steps is None:
                raw[tag] = (np.arange(len(values), dtype=np.int64), values, True)
                continue
            steps = np.asarray(steps, dtype=np.int64).reshape(-1)
            if steps.shape != values.shape:
                raise ValueError(
                    f"Received steps and values of different lengths for tag '{tag}', "
                    f"expected equal lengths. Received: {len(steps)} steps, {len(values)} values"
                )
            order = np.argsort(steps, kind="stable")
            raw[tag] = (steps[order], values[order], False)
        ends = None
        if epoch_end_steps is not None:
            ends = np.asarray(list(epoch_end_steps), dtype=np.int64)
        elif _tags.EPOCH in raw and not raw[_tags.EPOCH][2]:
            ends = raw[_tags.EPOCH][0]
        elif _tags.train("loss") in raw and not raw[_tags.train("loss")][2]:
            ends = raw[_tags.train("loss")][0]
        series = {}
        for tag, (steps, values, by_epoch) in raw.items():
            if by_epoch:
                epochs = steps
                if ends is not None and len(ends) >= len(steps):
                    steps = ends[: len(steps)].copy()
                else:
                    steps = np.full(len(values), -1, dtype=np.int64)
                series[tag] = Series(steps, values, epochs)
            else:
                series[tag] = Series(steps, values, epochs_for(steps, ends))
        return cls(scalars=series, epoch_end_steps=ends, **kwargs)

    # -- access ------------------------------------------------------------------
    def series(self, tag: str) -> Series | None:
        """The series of `tag`, or `None` when absent or empty."""
        s = self.scalars.get(tag)
        return s if s is not None and len(s) else None

    def layer_order(self) -> list[str]:
        """Layer names in model order (from the model description), when known."""
        if not self.model:
            return []
        return [str(layer.get("name")) for layer in self.model.get("layers", []) if layer.get("name")]

    def per_layer(self, kind: str) -> dict[str, Series]:
        """Per-layer series of one kind, in model order.

        Layers the model description lists come first in its order; the
        others follow in natural order (`dense`, `dense_1`, `dense_2`, ...).

        Args:
            kind: a key of `PER_LAYER`, e.g. `"grad_norm"`.

        Returns:
            layer -> `Series` (empty series left out; `grad_norm/global` too).
        """
        prefix = PER_LAYER[kind]
        found = {
            tag[len(prefix) :]: s
            for tag, s in self.scalars.items()
            if tag.startswith(prefix) and len(s)
        }
        found.pop("global", None)
        order = {name: i for i, name in enumerate(self.layer_order())}
        # the logger may key a layer by its variables' path ("sequential/dense"):
        # name it as the model description does when that is unambiguous
        renamed = {}
        for name in found:
            short = name.rsplit("/", 1)[-1]
            use = short if name not in order and short in order else name
            renamed.setdefault(use, []).append(name)
        if any(len(v) > 1 for v in renamed.values()):
            renamed = {name: [name] for name in found}

        def rank(name: str):
            return (order.get(name, len(order)), _natural_key(name))

        return {n: found[renamed[n][0]] for n in sorted(renamed, key=rank)}

    def layer_path(self, name: str | None) -> str | None:
        """The layer's path in the model (`decoder/dense`), as the gradient tags name it.

        Nested models give their layers short names that say nothing of
        where they sit (`dense` of the encoder or of the decoder?): a
        finding names the layer by its path when a per-layer tag knows it.

        Example:

        >>> s = Signals.from_arrays({"grad_norm/decoder/dense": ([1], [0.5])})
        >>> s.layer_path("dense"), s.layer_path("other")
        ('decoder/dense', 'other')
        """
        own = f"{(self.model or {}).get('name')}/"
        if name and name.startswith(own):  # the model's own name says nothing
            name = name[len(own):]
        if not name or "/" in name:
            return name
        paths = {tag[len(prefix):] for tag in self.scalars for prefix in PER_LAYER.values()
                 if tag.startswith(prefix) and tag[len(prefix):].endswith("/" + name)}
        paths = {p[len(own):] if p.startswith(own) else p for p in paths}
        return paths.pop() if len(paths) == 1 else name

    def metric_names(self) -> list[str]:
        """Epoch-level metric names seen under `train/` or `val/` (e.g. `loss`, `accuracy`)."""
        names = []
        for tag in self.scalars:
            if _tags.is_metric(tag):
                name = _tags.metric_name(tag)
                if name not in names:
                    names.append(name)
        return names

    def layer(self, name: str) -> dict | None:
        """The model description entry of layer `name` (else of its last `/` part), or `None`."""
        layers = (self.model or {}).get("layers", [])
        for candidate in (name, name.rsplit("/", 1)[-1]):
            for layer in layers:
                if layer.get("name") == candidate:
                    return layer
        return None

    def normalizes_input(self) -> str | None:
        """The layer that puts the input on its scale inside the model, if the model has one.

        With the description's `inputs` (each input and the classes of the
        layers that consume it): a name when every input goes first into a
        normalizing layer (`Rescaling`, `Normalization`, ...) or a layer that
        takes ids or strings (`Embedding`, `StringLookup`, ...), or is an
        integer/string input of such a model, or when the model only looks
        the input's values up (`use` "lookup": an `Embedding` at any depth,
        a gather, a one-hot). Without it (older logs), the
        first three layers are looked at for a normalizing layer.
        """
        model = self.model or {}
        inputs = model.get("inputs") or []
        if inputs:
            names = []
            for item in inputs:
                if item.get("use") in ("lookup", "unused"):
                    # the model gathers, one-hot encodes or looks the values up: ids, no scale
                    names.append("the model's lookup of its ids")
                    continue
                consumers = item.get("consumers") or []
                handled = [c for c in consumers
                           if c.get("class") in NORMALIZING_LAYERS | TOKEN_LAYERS]
                if not consumers or len(handled) < len(consumers):
                    return None
                names.append(str(handled[0].get("name")))
            return names[0] if names else None
        for layer in model.get("layers", [])[:3]:
            if layer.get("class") in NORMALIZING_LAYERS:
                return str(layer.get("name"))
        return None

    def output_layer(self) -> str | None:
        """The name of the model's last layer, from the model description."""
        names = self.layer_order()
        return names[-1] if names else None

    def truncated(self, step: int | None, epoch: int | None) -> Signals:
        """A copy holding only the points before `step` (or before `epoch` where steps are unknown).

        Args:
            step: the first global step to drop, or `None`.
            epoch: the first epoch to drop, used for points without a step, or `None`.

        Returns:
            A new `Signals` sharing everything but the cut series and histograms.
        """
        def keep(steps: np.ndarray, epochs: np.ndarray) -> np.ndarray:
            mask = np.ones(len(steps), dtype=bool)
            if step is not None:
                mask &= (steps < step) | (steps < 0)
            if epoch is not None:
                mask &= (steps >= 0) | (epochs < epoch)
            return mask

        scalars = {}
        for tag, s in self.scalars.items():
            m = keep(s.steps, s.epochs)
            scalars[tag] = Series(s.steps[m], s.values[m], s.epochs[m])
        histograms = {tag: [(st, b) for st, b in points if step is None or st < step]
                      for tag, points in self.histograms.items()}
        return dataclasses.replace(self, scalars=scalars, histograms=histograms)

    def epoch_of(self, step: int | None) -> int | None:
        """The 0-based epoch of a global step, or `None` when unknown."""
        if step is None or self.epoch_end_steps is None or not len(self.epoch_end_steps):
            return None
        return int(epochs_for(np.array([step]), self.epoch_end_steps)[0])

    def step_of_epoch(self, epoch: int | None) -> int | None:
        """The last global step of `epoch`, or `None` when unknown."""
        if epoch is None or self.epoch_end_steps is None or epoch >= len(self.epoch_end_steps):
            return None
        return int(self.epoch_end_steps[epoch])


def death_point(signals: Signals) -> tuple[int | None, int | None] | None:
    """Where a run died: the first point after which its loss or gradient norm is never finite again.

    Args:
        signals: the run.

    Returns:
        `(step, epoch)` of the earliest such point over `batch/loss`,
        `train/loss` and `grad_norm/global` (either may be `None`), or `None`
        when the run never died.
    """
    points = []
    for tag in (_tags.batch("loss"), _tags.train("loss"), _tags.GLOBAL_GRAD_NORM):
        s = signals.series(tag)
        if s is None:
            continue
        finite = np.flatnonzero(np.isfinite(s.values))
        start = int(finite[-1]) + 1 if len(finite) else 0
        if start < len(s):
            points.append(s.at(start))
    if not points:
        return None
    with_steps = [p for p in points if p[0] is not None]
    if with_steps:
        step = min(p[0] for p in with_steps)
        return step, signals.epoch_of(step)
    return None, min(p[1] for p in points if p[1] is not None)
