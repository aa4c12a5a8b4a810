"""The five checkpoints of a guarded step, one builder each: flags as tensors, never a raise.

* `data`: the batch against the contract, before the step runs;
* `forward`: the model's predictions (or every tapped layer's output);
* `loss`: the loss the step computed with `compute_loss`, or, when the step
  computes its loss itself (a VAE, a GAN), every float value it returns;
* `gradients`: every non-None gradient handed to an optimizer;
* `update`: every weight, non-trainable variable and optimizer variable
  after the step: an update whose result is non-finite is rejected like a
  non-finite gradient.

Each builder returns `Flag`s. A flag's `ok` is a scalar bool; `tensor`,
when set, is what NaN/+Inf/-Inf counts are taken from on a failing step
only. The host words a data failure from the batch itself.

Example:

>>> import tensorflow as tf
>>> [f.slot.where for f in finite_flags("loss", {"loss": tf.constant(1.0)})]
['loss']
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfguard.checks.contract import Contract
from tfguard.hooks.context import StepContext

CHECKPOINTS = ("data", "forward", "loss", "gradients", "update")
MUST_REJECT = ("loss", "gradients", "update")
"""Checkpoints whose failure is never applied, whatever the policy (it would poison the weights)."""


@dataclasses.dataclass(frozen=True)
class Slot:
    """One flag of the step: which checkpoint, which tensor, which check."""

    checkpoint: str
    where: str
    check: str

    @property
    def must_reject(self) -> bool:
        """Whether a failure here is never applied (`warn` too): loss, gradients, update, labels."""
        return self.checkpoint in MUST_REJECT or self.check == "labels"


@dataclasses.dataclass
class Flag:
    """A slot with its flag, or, for a finiteness check, the tensor it is computed from.

    Finiteness flags are computed together in `finite_ok` (one sum per
    tensor on a good step); `ok` is set for every other check.
    """

    slot: Slot
    ok: tf.Tensor | None = None
    tensor: tf.Tensor | None = None
    result: object = None  # a data CheckResult (counted in the graph for several replicas)


def float_leaves(value) -> list[tf.Tensor]:
    """The floating-point tensors in a nested value."""
    return [t for t in tf.nest.flatten(value) if isinstance(t, tf.Tensor) and t.dtype.is_floating]


def finite_flags(checkpoint: str, named: dict) -> list[Flag]:
    """One `finite` flag per float tensor: `where -> tensor` (computed by `finite_ok`)."""
    return [Flag(Slot(checkpoint, where, "finite"), tensor=t) for where, t in named.items()]


def finite_ok(tensors: list[tf.Tensor], counts=None):
    """Per tensor, whether every value is finite: a bool vector (and, with `counts`, the counts).

    A good step costs one sum per tensor: a finite sum of every tensor
    means every value is finite. Only when a sum is not finite (a NaN or
    Inf, or a sum that overflowed) is each tensor checked value by value,
    under a `tf.cond`, so the flags are exact.

    Example:

    >>> finite_ok([tf.constant([1.0, 2.0]), tf.constant([3e38, 3e38]), tf.constant([float("nan")])]).numpy()
    array([ True,  True, False])

    Args:
        tensors: float tensors.
        counts: a function building a `[n, 4]` tensor of counts, computed
            in the same failure branch (zeros on a good step). Defaults to
            `None` (flags only).

    Returns:
        The flags, or `(flags, counts)` when `counts` is given.
    """
    n = len(tensors)
    sums = tf.stack([tf.reduce_sum(tf.cast(t, tf.float32)) for t in tensors])

    def exact():
        flat = [tf.reshape(t, [-1]) for t in tensors]
        sizes = tf.stack([tf.size(t) for t in flat])
        finite = tf.concat([tf.math.is_finite(t) for t in flat], axis=0)
        segments = tf.repeat(tf.range(n), sizes)
        bad = tf.math.unsorted_segment_sum(tf.cast(~finite, tf.int32), segments, n)
        flags = tf.equal(bad, 0)
        return flags if counts is None else (flags, counts())

    def good():
        flags = tf.ones([n], tf.bool)
        return flags if counts is None else (flags, tf.zeros([n, 4]))

    return tf.cond(tf.reduce_all(tf.math.is_finite(sums)), good, exact)


def data(contract: Contract, x, y, sample_weight, *, counted: bool) -> list[Flag]:
    """The batch against the contract.

    Args:
        contract: the data contract.
        x, y, sample_weight: the batch, unpacked.
        counted: compute counts in the graph (several replicas: the batch
            is not in hand on the host); otherwise only the flags.
    """
    if not counted:
        return [Flag(Slot("data", target, check), ok)
                for target, check, ok in contract.flags(x, y, sample_weight)]
    return [Flag(Slot("data", r.target, r.check), r.ok, result=r)
            for r in contract.evaluate(x, y, sample_weight)]


def forward(mode: str, context: StepContext, records: list) -> list[Flag]:
    """The model's predictions (`"output"`) or every tapped layer's output (`"layers"`).

    In `"output"` mode the predictions are those handed to `compute_loss`;
    a step that never calls it is watched through its tapped layers (the
    model's direct sub-layers: a GAN's generator and discriminator).
    """
    if mode == "off":
        return []
    named: dict[str, tf.Tensor] = {}
    if mode == "output" and context.losses:
        for number, seen in enumerate(context.losses):
            outs = float_leaves(seen.y_pred)
            for index, tensor in enumerate(outs):
                label = "model output" + (f" {index}" if len(outs) > 1 else "")
                if len(context.losses) > 1:
                    label += f" (loss call {number + 1})"
                named[label] = tensor
        return finite_flags("forward", named)
    for layer, outputs in records:
        outs = float_leaves(outputs)
        for index, tensor in enumerate(outs):
            label = f"layer '{layer.name}'" + (f" (output {index})" if len(outs) > 1 else "")
            while label in named:
                label += "'"
            named[label] = tensor
    return finite_flags("forward", named)


def loss(context: StepContext, logs) -> list[Flag]:
    """The losses `compute_loss` returned; else every float scalar the step returned."""
    if context.losses:
        named = {("loss" if len(context.losses) == 1 else f"loss {i + 1}"): seen.loss
                 for i, seen in enumerate(context.losses)}
        return finite_flags("loss", named)
    named = {}
    if isinstance(logs, dict):
        for key, value in logs.items():
            if isinstance(value, tf.Tensor) and value.dtype.is_floating:
                named[f"returned '{key}'"] = value
    return finite_flags("loss", named)


def gradients(context: StepContext) -> list[Flag]:
    """Every non-None gradient handed to an optimizer (a loss scale's own overflow excepted)."""
    named: dict[str, tf.Tensor] = {}
    for update in context.updates:
        if update.scale is not None:  # LossScaleOptimizer: non-finite is how it finds its scale
            continue
        for variable, grad in zip(update.variables, update.gradients):
            if grad is None:
                continue
            label = f"gradient of '{_path(variable)}'"
            while label in named:
                label += "'"
            named[label] = tf.convert_to_tensor(grad)
    return finite_flags("gradients", named)


def update(context: StepContext) -> list[Flag]:
    """Every held float variable after the step (weights, moving statistics, optimizer slots)."""
    named = {}
    for held in context.transaction.checked():
        named[f"update of '{_path(held.variable)}'"] = tf.convert_to_tensor(held.tf_variable)
    return finite_flags("update", named)


def _path(variable) -> str:
    return getattr(variable, "path", None) or variable.name


__all__ = ["CHECKPOINTS", "MUST_REJECT", "Flag", "Slot", "data", "finite_flags", "finite_ok", "float_leaves",
           "forward", "gradients", "loss", "update"]
