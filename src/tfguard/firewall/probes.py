"""The signals a recording step computes, in the graph, from what the step already holds.

Gradients come from the updates the step made (every optimizer: a GAN's
two), weights before the update from the step's transaction, layer outputs
from the taps. Nothing is computed twice: the gradient norms, weight norms
and update ratios, dead/saturated fractions, input and label statistics
and histograms are read off tensors the step has anyway.

`build` returns two ordered maps, scalar tag -> thunk and histogram tag ->
tensor; the step stacks the scalars into one tensor and buckets the
histograms in one pass (`histograms_of`).

Example:

>>> Wanted(weights=True, histograms=frozenset({"gradients"})).weights
True
"""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from tfguard import tags
from tfguard.checks.contract import leaves
from tfguard.firewall import stats
from tfguard.firewall.checkpoints import float_leaves
from tfguard.hooks.context import StepContext
from tfguard.hooks.transaction import is_float

HIST_BUCKETS = 30
NO_RATIO = -1.0
"""`update_ratio` of a layer whose weights were all zero: undefined, left out on the host."""


@dataclasses.dataclass(frozen=True)
class Wanted:
    """What the listeners asked the recording step for (the union of their requests)."""

    weights: bool = False  # weight_norm/<layer>, update_ratio/<layer>
    histograms: frozenset = frozenset()  # of "activations", "gradients", "weights"


def layer_key(variable, model_name: str) -> str:
    """The layer a variable belongs to, named as the activation tags name it.

    Keras paths are `<layer>/<var>` or `<model>/<layer>/<var>`; the model's
    own name is dropped so `grad_norm/dense` and
    `activation/dead_fraction/dense` agree.

    Example:

    >>> class V: path = "mlp/dense/kernel"
    >>> layer_key(V(), "mlp")
    'dense'
    """
    parts = (getattr(variable, "path", None) or variable.name).split("/")
    if len(parts) > 2 and parts[0] == model_name:
        parts = parts[1:]
    return "/".join(parts[:-1]) if len(parts) > 1 else parts[0]


def build(model: keras.Model, context: StepContext, records: list, x, y, wanted: Wanted,
          histograms: bool) -> tuple[dict, dict]:
    """`tag -> thunk` for scalars and, when `histograms`, `tag -> tensor or variable` to bucket.

    The histograms are bucketed together by `histograms_of` (one pass over
    all of them), inside the branch that runs only on histogram steps.
    """
    scalars: dict = {}
    hists: dict = {}
    variables, grads = _gradients(context)
    _gradient_signals(model, variables, grads, scalars)
    _input_signals(x, y, scalars)
    seen: set[str] = set()
    for layer, outputs in records:
        outs = float_leaves(outputs)
        if not outs or layer.name in seen:
            continue
        seen.add(layer.name)
        kind = stats.activation_kind(layer)
        if kind == "relu":
            scalars[tags.dead_fraction(layer.name)] = lambda t=outs[0]: stats.dead_fraction(t)
        elif kind in stats.SATURATING:
            scalars[tags.saturated_fraction(layer.name)] = (
                lambda t=outs[0], k=kind: stats.saturated_fraction(t, k))
        if histograms and "activations" in wanted.histograms:
            hists[tags.hist_activations(layer.name)] = stats.leading_examples(outs[0])
    if histograms and "gradients" in wanted.histograms:
        for variable, grad in zip(variables, grads):
            hists[tags.hist_gradients(variable.path)] = grad
    if wanted.weights:
        _weight_signals(model, context, scalars)
    if histograms and "weights" in wanted.histograms:
        for variable in model.weights:  # after the update, non-trainable ones too
            if is_float(variable):
                hists[tags.hist_weights(variable.path)] = variable
    return scalars, hists


def histograms_of(values: dict) -> tf.Tensor:
    """`[n, HIST_BUCKETS, 3]` buckets of every histogram value (read now: weights after the update)."""
    return stats.buckets_many([tf.convert_to_tensor(v) for v in values.values()], HIST_BUCKETS)


def _gradients(context: StepContext) -> tuple[list, list]:
    """Every (variable, gradient) of the step's updates, unscaled, first update of a variable wins."""
    variables, grads, seen = [], [], set()
    for update in context.updates:
        for variable, grad in zip(update.variables, update.unscaled()):
            if grad is None or id(variable) in seen:
                continue
            seen.add(id(variable))
            variables.append(variable)
            grads.append(tf.convert_to_tensor(grad))
    return variables, grads


def _gradient_signals(model, variables, grads, scalars) -> None:
    squares = [tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads]
    by_layer: dict[str, list[int]] = {}
    for index, variable in enumerate(variables):
        by_layer.setdefault(layer_key(variable, model.name), []).append(index)
    if squares:
        scalars[tags.GLOBAL_GRAD_NORM] = lambda: tf.sqrt(tf.add_n(squares))
    for layer, positions in by_layer.items():
        scalars[tags.grad_norm(layer)] = lambda p=positions: tf.sqrt(tf.add_n([squares[i] for i in p]))
        members = [grads[i] for i in positions]
        scalars[tags.zero_grad_fraction(layer)] = lambda m=members: stats.zero_fraction(m)


def _input_signals(x, y, scalars) -> None:
    inputs = [t for _, t in leaves("x", x) if t.dtype.is_floating or t.dtype.is_integer]
    if inputs:
        computed = {}

        def moment(key, first=inputs[0]):
            # The four thunks run in one graph: the moments are computed once there.
            if "moments" not in computed:
                computed["moments"] = stats.moments(first)
            return computed["moments"][key]

        for key, tag in (("min", tags.INPUT_MIN), ("max", tags.INPUT_MAX),
                         ("mean", tags.INPUT_MEAN), ("std", tags.INPUT_STD)):
            scalars[tag] = lambda k=key: moment(k)
    targets = [t for _, t in leaves("y", y) if t.dtype.is_floating or t.dtype.is_integer]
    if targets:
        scalars[tags.LABEL_MIN] = lambda t=targets[0]: tf.reduce_min(tf.cast(t, tf.float32))
        scalars[tags.LABEL_MAX] = lambda t=targets[0]: tf.reduce_max(tf.cast(t, tf.float32))
        target = targets[0]
        if target.dtype.is_floating and target.shape.rank is not None and target.shape.rank >= 2 \
                and (target.shape[-1] is None or target.shape[-1] > 1):
            # one-hot rows sum to 1; multi-hot rows (a multi-label problem) to more
            scalars[tags.LABEL_ROW_SUM_MAX] = lambda t=target: tf.reduce_max(
                tf.reduce_sum(tf.cast(t, tf.float32), axis=-1))


def _weight_signals(model, context: StepContext, scalars) -> None:
    """`weight_norm/<layer>` and `update_ratio/<layer>` from the held values before the step."""
    by_layer: dict[str, list] = {}
    for update in context.updates:
        for variable in update.variables:
            before = context.transaction.before(variable)
            if before is not None and is_float(variable):
                members = by_layer.setdefault(layer_key(variable, model.name), [])
                if all(variable is not m[0] for m in members):
                    members.append((variable, before))

    def norms(members):
        after = [tf.cast(tf.convert_to_tensor(v), tf.float32) for v, _ in members]
        old = [tf.cast(b, tf.float32) for _, b in members]
        weight = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(w)) for w in after]))
        delta = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(w - b)) for w, b in zip(after, old)]))
        base = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(b)) for b in old]))
        return weight, tf.where(tf.equal(base, 0.0), tf.constant(NO_RATIO), delta / base)

    for layer, members in by_layer.items():
        computed: dict = {}

        def pick(which, m=members, c=computed):
            if "norms" not in c:
                c["norms"] = norms(m)
            return c["norms"][which]

        scalars[tags.weight_norm(layer)] = lambda f=pick: f(0)
        scalars[tags.update_ratio(layer)] = lambda f=pick: f(1)


__all__ = ["HIST_BUCKETS", "NO_RATIO", "Wanted", "build", "histograms_of", "layer_key"]
