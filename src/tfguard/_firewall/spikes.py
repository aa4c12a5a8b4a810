"""Loss spikes, a check stage of the firewall: a step whose loss or gradient norm is an outlier.

Most training that goes wrong at scale never produces a NaN: a batch with a
few corrupted or mislabelled records makes the loss jump hundreds of
standard deviations, Adam's moments absorb it, and the run spends thousands
of steps recovering. With `guard(model, spikes=True)` the step's loss and
global gradient norm are compared with the last `window` accepted steps,
in the graph: a value above `mean + sigmas * std` of the window, once the
window holds `warmup` values, fails the `"spike"` check stage like a NaN
fails the loss stage. The policy then acts as for any violation: `skip`
leaves the model, its metrics, the optimizer's slots and iterations
bitwise as before, `raise` stops with a `GuardViolation` naming the
signal, its value, the window's mean and spread and the threshold, `warn`
applies the step and reports it; the batch is quarantined.

The rule is OLMo-core's `SkipStepOptimizer` (mean + 6 sigma of the last 128
steps, acting after 64; MaxText's `skip_step_on_spikes` is the same rule),
with the window kept clean: only an accepted step whose values are finite
and not a spike enters it. (OLMo-core appended every step's values, so a
NaN once entered its window and made it skip the next 129 steps; here a
rejected step, a warned spike and a NaN never do.)

Everything is a tensor and the statistics are `tf.Variable`s (a ring buffer
per signal): no host sync per step, and it holds under `jit_compile=True`.
Under a `tf.distribute` strategy the signals are summed over the replicas
first (the loss Keras's `compute_loss` returns is scaled by the replicas:
the sum is the global batch's loss; the gradients at the optimizer's apply
are each replica's own: the norm is the root of their squares summed), so
every replica takes the same decision and keeps the same window.

Example (the window's statistics, as the step computes them):

>>> import numpy as np, tensorflow as tf
>>> stats = window_statistics(tf.constant([[1.0, 2.0, 3.0, 0.0]]), tf.constant(3, tf.int64), 2.0)
>>> np.round(stats.numpy(), 3).tolist()  # mean, std, threshold, values in the window
[[2.0, 1.0, 4.0, 3.0]]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard._firewall.stages import Flag, Slot
from tfguard._signals import stats

STAGE = "spike"
"""The check stage of a spike (a `Slot`'s stage and check)."""
SIGNALS = ("loss", "gradient_norm")
"""What a spike can be seen in: the step's loss, the global norm of its gradients."""
GRADIENT_NORM = "gradient_norm"
TABLE = "spike"
"""The step's output: `[k, 6]` per spike slot, its value, the window's mean, std, threshold, size and spread scale."""
COLUMNS = ("value", "mean", "std", "threshold", "window", "scale")


@dataclasses.dataclass(frozen=True)
class SpikeConfig:
    """When a step's loss or gradient norm is a spike.

    A value is a spike when it exceeds the mean of the window plus `sigmas`
    times its standard deviation (the sample one, with Bessel's correction),
    once the window holds `warmup` values.

    Example:

    >>> SpikeConfig(window=64, warmup=32).sigmas
    6.0

    Args:
        window: how many accepted steps the statistics span. OLMo-core's
            `SkipStepOptimizer(rolling_interval_length=128)`. Defaults to `128`.
        sigmas: how many standard deviations above the mean a spike lies.
            OLMo-core's `sigma_factor=6`. Defaults to `6.0`.
        warmup: the values the window must hold before the check acts.
            OLMo-core acts once it holds `rolling_interval_length // 2`.
            Defaults to `64`.
        signals: what is watched: `"loss"` (each loss the step computes
            with `compute_loss`; a hand-written loop's returned loss) and
            `"gradient_norm"` (the global norm of every gradient handed to
            an optimizer). OLMo-core watches both. Defaults to
            `("loss", "gradient_norm")`.
    """

    window: int = 128
    sigmas: float = 6.0
    warmup: int = 64
    signals: tuple = SIGNALS

    def __post_init__(self):
        if isinstance(self.signals, str):
            object.__setattr__(self, "signals", (self.signals,))
        object.__setattr__(self, "signals", tuple(self.signals))
        for name in ("window", "warmup"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ContractError(f"Received an invalid value for `{name}`, expected an integer of at "
                                    f"least 2. Received: {name}={value!r}")
        if self.warmup > self.window:
            raise ContractError(f"Received warmup={self.warmup} with window={self.window}, expected "
                                "warmup <= window: the window never holds more than `window` values.")
        if isinstance(self.sigmas, bool) or not isinstance(self.sigmas, (int, float)) or not self.sigmas > 0:
            raise ContractError("Received an invalid value for `sigmas`, expected a positive number. "
                                f"Received: sigmas={self.sigmas!r}")
        object.__setattr__(self, "sigmas", float(self.sigmas))
        unknown = [s for s in self.signals if s not in SIGNALS]
        if unknown or not self.signals:
            raise ContractError(f"Received an invalid value for `signals`, expected one or more of {SIGNALS}. "
                                f"Received: signals={self.signals!r}")


def spike_config(value) -> SpikeConfig | None:
    """`guard(spikes=...)` as a `SpikeConfig`: `True` the defaults, a mapping its fields, `False`/`None` off.

    Example:

    >>> spike_config({"sigmas": 8}).sigmas, spike_config(False)
    (8.0, None)

    Raises:
        ContractError: for anything else, or a mapping with a key `SpikeConfig` does not have.
    """
    if value is None or value is False:
        return None
    if value is True:
        return SpikeConfig()
    if isinstance(value, SpikeConfig):
        return value
    if isinstance(value, Mapping):
        fields = {f.name for f in dataclasses.fields(SpikeConfig)}
        unknown = sorted(str(k) for k in value if k not in fields)
        if unknown:
            raise ContractError(f"Received an invalid key for `spikes`: {', '.join(unknown)}, expected "
                                f"some of {sorted(fields)}. Received: spikes={dict(value)!r}")
        return SpikeConfig(**value)
    raise ContractError("Received an invalid value for `spikes`, expected True, False, a SpikeConfig or a "
                        f"mapping of its fields. Received: spikes={value!r}")


class SpikeWindow:
    """The statistics of one guarded model: the last `window` accepted values of its signals (`tf.Variable`s).

    One ring `[k, window]` per set of signals a step watches, the count of
    steps it took, and the most examples an accepted batch held. The
    variables are made at trace time, the first time the set is seen,
    under the model's strategy (mirrored, written once per step by the
    first replica: every replica computes the same values). They outlive
    retraces and `fit` calls: the window describes the model's training.

    Args:
        config: the `SpikeConfig`.
        strategy: the model's `tf.distribute` strategy. Defaults to `None` (the current one).
    """

    def __init__(self, config: SpikeConfig, strategy=None):
        self.config = config
        self.strategy = strategy
        self._variables: dict[str, tf.Variable] = {}
        self._rings: dict[tuple, tuple[tf.Variable, tf.Variable]] = {}

    def ring(self, names: tuple) -> tuple[tf.Variable, tf.Variable]:
        """The ring `[len(names), window]` of these signals and the count of steps it took, made on first use."""
        found = self._rings.get(names)
        if found is None:
            key = "_".join(name.replace(" ", "_") for name in names)
            found = self._rings[names] = (
                self._variable(f"tfguard_spike_{key}", np.zeros([len(names), self.config.window], np.float32)),
                self._variable(f"tfguard_spike_{key}_count", np.int64(0)))
        return found

    def largest_batch(self) -> tf.Variable:
        """The most examples an accepted step's batch held (0 before the first), made on first use."""
        return self._variable("tfguard_spike_largest_batch", np.float32(0.0))

    def _variable(self, name: str, initial: np.ndarray) -> tf.Variable:
        """A variable made outside the trace (its initial value is NumPy: no tensor of the step's graph)."""
        found = self._variables.get(name)
        if found is None:
            replica = tf.distribute.get_replica_context()
            if tf.distribute.has_strategy() and replica is not None:  # made once, for every replica's trace
                found = replica.merge_call(lambda _: self._make(name, initial))
            else:
                found = self._make(name, initial)
            self._variables[name] = found
        return found

    def _make(self, name: str, initial: np.ndarray) -> tf.Variable:
        strategy = self.strategy or tf.distribute.get_strategy()
        with tf.init_scope(), strategy.scope():
            return tf.Variable(initial, trainable=False, name=name,
                               aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def values(self, name: str) -> np.ndarray:
        """The values of signal `name` in its window, oldest first (NumPy; for tests and reports)."""
        for names, (ring, count) in self._rings.items():
            if name in names:
                row, n, window = np.asarray(ring.numpy())[names.index(name)], int(count.numpy()), self.config.window
                if n <= window:
                    return row[:n]
                return np.concatenate([row[n % window:], row[:n % window]])
        return np.zeros([0], np.float32)


def moments(ring: tf.Tensor, held: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """`(mean, std)` `[k]` of the first `held` values of each row of a ring `[k, window]` (`held`: a float scalar).

    The std is the sample one (Bessel's correction, as `torch.std`); with
    fewer than 2 values it is 0.
    """
    window = ring.shape[1]
    inside = tf.cast(tf.range(window, dtype=tf.float32) < held, tf.float32)
    mean = tf.reduce_sum(ring * inside, axis=1) / tf.maximum(held, 1.0)
    deviations = (ring - mean[:, None]) * inside
    std = tf.sqrt(tf.reduce_sum(tf.square(deviations), axis=1) / tf.maximum(held - 1.0, 1.0))
    return mean, std


def window_statistics(ring: tf.Tensor, count: tf.Tensor, sigmas: float) -> tf.Tensor:
    """`[k, 4]`: per row of a ring, the mean, the std, the threshold `mean + sigmas * std`, the values it holds.

    The ring `[k, window]` holds `min(count, window)` values in the first
    slots of each row (`moments`).
    """
    held = tf.cast(tf.minimum(count, ring.shape[1]), tf.float32)
    mean, std = moments(ring, held)
    return tf.stack([mean, std, mean + sigmas * std, tf.fill(tf.shape(mean), held)], axis=1)


def _all_reduce_sum(value: tf.Tensor) -> tf.Tensor:
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


class SpikeCheck:
    """The spike stage of one trace of a guarded step: its signals' flags, and the window's update.

    `flags(context)` may be called several times in a step (at a gated
    update's apply, and at the step's end): the same updates and losses
    give the same `Flag` objects, so the gate's decision covers the step's
    when nothing came after it (`tfguard._firewall.gate.Gate.covers`). Each
    update's squared gradient norm is taken once, where the update is
    first judged: at its apply when it is gated (the gradients die with it).

    A batch smaller than the largest an accepted step held (the last,
    partial batch of an epoch) has its allowed spread widened by
    `sqrt(largest / rows)`: the loss of fewer examples is a noisier mean
    (its standard error grows as `1 / sqrt(rows)`). Batches of one size
    are judged by OLMo-core's rule exactly.

    Args:
        window: the model's `SpikeWindow`.
        rows: the examples in this replica's batch (a scalar tensor), or `None`
            when the step's inputs do not say. Defaults to `None`.
    """

    def __init__(self, window: SpikeWindow, rows: tf.Tensor | None = None):
        self.window = window
        self.config = window.config
        self.rows = rows
        self._squares: dict[int, tf.Tensor] = {}  # id(update) -> the squared norm of its gradients
        self._taken: dict[tuple, tuple] = {}  # (losses, updates) -> (flags, last)
        self.last: tuple | None = None  # (names, values [k], spiking [k], table [k, 6], rows) of the last flags

    def flags(self, context, returned=()) -> list[Flag]:
        """One `"spike"` flag per watched signal of the step so far.

        Args:
            context: the step's `StepContext` (its losses and updates).
            returned: the float scalars a hand-written step returned, its loss
                when it never calls `compute_loss`. Defaults to none.
        """
        losses = [seen.loss for seen in context.losses] or list(returned)
        updates = [u for u in context.updates if any(g is not None for g in u.gradients)]
        watch_loss = "loss" in self.config.signals
        watch_norm = GRADIENT_NORM in self.config.signals and bool(updates)
        key = (tuple(id(t) for t in losses) if watch_loss else (), tuple(id(u) for u in updates) if watch_norm else ())
        if key not in self._taken:
            self._taken[key] = self._judge(losses, updates, watch_loss, watch_norm)
        flags, self.last = self._taken[key]
        return flags

    def _judge(self, losses: list, updates: list, watch_loss: bool, watch_norm: bool) -> tuple[list[Flag], tuple | None]:
        names, parts = [], []
        if watch_loss:
            for i, loss in enumerate(losses):
                names.append("loss" if len(losses) == 1 else f"loss {i + 1}")
                parts.append(tf.reshape(tf.reduce_sum(stats.as_float32(loss)), []))
        if watch_norm:
            names.append(GRADIENT_NORM)
            squares = [self._squared_norm(u) for u in updates]
            parts.append(tf.add_n(squares) if len(squares) > 1 else squares[0])
        if not names:
            return [], None
        k = len(names)
        if self.rows is not None:
            parts.append(tf.cast(self.rows, tf.float32))
        summed = _all_reduce_sum(tf.stack(parts))  # every replica decides on the same numbers
        if watch_norm:  # the squared norm's root, in place
            roots = tf.constant([i == k - 1 for i in range(len(parts))])
            summed = tf.where(roots, tf.sqrt(summed), summed)
        values = summed[:k] if self.rows is not None else summed
        rows = summed[k] if self.rows is not None else None
        ring, count = self.window.ring(tuple(names))
        held = tf.cast(tf.minimum(tf.convert_to_tensor(count), self.config.window), tf.float32)
        mean, std = moments(tf.convert_to_tensor(ring), held)
        scale = tf.constant(1.0)
        if rows is not None:  # a partial batch is a noisier mean: its spread is wider
            largest = tf.convert_to_tensor(self.window.largest_batch())
            scale = tf.sqrt(tf.maximum(largest, rows) / tf.maximum(rows, 1.0))
        threshold = mean + (self.config.sigmas * scale) * std
        spiking = (held >= float(self.config.warmup)) & tf.math.is_finite(values) & (values > threshold)
        table = tf.concat([tf.stack([values, mean, std, threshold], axis=1),
                           tf.broadcast_to(tf.stack([held, scale]), [k, 2])], axis=1)
        oks = tf.unstack(tf.logical_not(spiking), num=k)
        flags = [Flag(Slot(STAGE, name, STAGE), ok=ok) for name, ok in zip(names, oks)]
        return flags, (names, values, spiking, table, rows)

    def _squared_norm(self, update) -> tf.Tensor:
        found = self._squares.get(id(update))
        if found is None:
            grads = [g for g in update.unscaled() if g is not None]
            found = self._squares[id(update)] = stats.total_squares(grads)
        return found

    @property
    def table(self) -> tf.Tensor | None:
        """`[k, 6]` of the last flags taken: value, mean, std, threshold, window size, spread scale (`COLUMNS`)."""
        return None if self.last is None else self.last[3]

    def record(self, reject: tf.Tensor) -> None:
        """Enters the step's values into the window when the step was accepted, none is a spike and all are finite.

        A rejected step (any violation), a warned spike (applied, yet an
        outlier) and a non-finite value (a loss-scaled step whose gradients
        overflowed) never enter: one bad batch cannot widen the window and
        hide the next, nor make it skip healthy steps.
        """
        if self.last is None:
            return
        names, values, spiking, _, rows = self.last
        enter = (tf.logical_not(reject) & tf.logical_not(tf.reduce_any(spiking))
                 & tf.reduce_all(tf.math.is_finite(values)))
        if rows is not None:
            largest = self.window.largest_batch()
            held_most = tf.convert_to_tensor(largest)
            largest.assign(tf.where(enter, tf.maximum(held_most, rows), held_most))
        ring, count = self.window.ring(tuple(names))
        held = tf.convert_to_tensor(ring)
        slot = tf.one_hot(count % self.config.window, self.config.window, on_value=True, off_value=False) & enter
        ring.assign(tf.where(slot, values[:, None], held))
        count.assign_add(tf.cast(enter, tf.int64))


def batch_rows(x) -> tf.Tensor | None:
    """The examples in a batch: the leading dimension of its first input tensor, or `None`.

    Example:

    >>> int(batch_rows({"a": tf.zeros([5, 2])}))
    5
    """
    for leaf in tf.nest.flatten(x):
        if isinstance(leaf, tf.Tensor) and leaf.shape.rank:
            return tf.shape(leaf)[0]
    return None


def describe(plan, index: int, table, sigmas: float) -> tuple[dict, str]:
    """The counts and words of a failed spike slot: its value, the window's mean, spread and threshold.

    Example:

    >>> import numpy as np
    >>> class Plan: slots = [Slot("loss", "loss", "finite"), Slot(STAGE, "loss", STAGE)]
    >>> counts, text = describe(Plan(), 1, np.array([[9.0, 1.0, 0.25, 2.5, 128.0, 1.0]]), 6.0)
    >>> text
    'is a spike: 9 > 2.5, the mean 1 + 6 x the std 0.25 of the last 128 accepted steps'

    Args:
        plan: the step's `Plan`.
        index: the failed slot.
        table: the step's spike rows (`StepOutcome.spike_table`), one per spike slot.
        sigmas: the configured width of the window, in standard deviations.
    """
    row = sum(1 for slot in plan.slots[:index] if slot.stage == STAGE)
    values = [float(v) for v in table[row]]
    counts = dict(zip(COLUMNS, values))
    counts["sigmas"] = sigmas
    value, mean, std, threshold, held, scale = values
    widened = f" x {scale:.3g} (a smaller batch than the largest)" if scale > 1.0 + 1e-6 else ""
    return counts, (f"is a spike: {value:.6g} > {threshold:.6g}, the mean {mean:.6g} + {sigmas:g} x the std "
                    f"{std:.6g}{widened} of the last {int(held)} accepted steps")


__all__ = ["COLUMNS", "GRADIENT_NORM", "SIGNALS", "STAGE", "TABLE", "SpikeCheck", "SpikeConfig", "SpikeWindow",
           "batch_rows", "describe", "moments", "spike_config", "window_statistics"]
