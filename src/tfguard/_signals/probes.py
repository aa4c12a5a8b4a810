"""The signals a recording step computes, in the graph, from what the step already holds.

Gradients come from the updates the step made (every optimizer: a GAN's
two), weights before the update as the step took them (`MeasuredStep.before`: held by
a guard's transaction, or copied at the apply on recording steps), layer outputs
from the taps. Nothing is computed twice: the gradient norms, weight norms
and update ratios, dead/saturated fractions, input and label statistics
and histograms are read off tensors the step has anyway.

`build` returns the scalar signals as `Group`s (tags computed together:
every layer's gradient norm from one vector of squared norms and one
segment sum), an ordered map histogram tag -> tensor, and the weights whose
histograms the host takes after the step; the step puts the scalars into
one vector (`signals_of`) inside the branch of the recording step that
runs only when the host says it is due; `tfguard._signals.histograms`
buckets the histograms (weights: on the host, after the step).

Example:

>>> SignalRequest(weights=True, histograms=frozenset({"gradients"})).weights
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

import keras
import tensorflow as tf

from tfguard import _tags
from tfguard._hooks import dry_run
from tfguard._hooks.functional_cond import keep_cond_functional
from tfguard._hooks.stacks import stack_groups
from tfguard._hooks.transaction import is_float, tf_variable
from tfguard._signals import stats
from tfguard._signals.histograms import Sample, histograms_when
from tfguard.checks._contract import float_leaves, leaves

NO_RATIO = -1.0
"""`update_ratio` of a layer whose weights were all zero: undefined, left out on the host."""


class MeasuredStep(Protocol):
    """What the signals read of a traced step (`tfguard._firewall.apply_interception.FirewallContext` is one).

    Attributes:
        updates: the step's optimizer updates (`tfguard._hooks.context.Update`).
        gradient_stats: variable id -> `(table, row)` of `stats.gradient_rows`, taken as the
            update was applied.
        gradient_buckets: variable id -> its gradient's histogram, bucketed as the update was applied.
        weight_stats: tf variable id -> `(table, row)`: squared norms before, of the change and after.
    """

    updates: list
    gradient_stats: dict
    gradient_buckets: dict
    weight_stats: dict

    def has_before(self, variable) -> bool:
        """Whether the step took `variable`'s value before its update."""

    def before(self, variable) -> tf.Tensor:
        """`variable`'s value before the step's update."""

    def stacked_before(self, variables) -> tf.Tensor | None:
        """The values of `variables` (of one shape) before the update as one stack, or `None`."""


@dataclasses.dataclass(frozen=True)
class SignalRequest:
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


@dataclasses.dataclass
class Group:
    """Scalar signals computed together: `compute()` returns a float32 `[len(tags)]` vector (or a scalar, for one tag).

    Built only inside the recording branch of the step, so a step that
    records nothing runs none of it.
    """

    tags: list[str]
    compute: Callable[[], tf.Tensor]


@dataclasses.dataclass(frozen=True)
class Recording:
    """What the recording trace adds to a step.

    Args:
        outputs: `"signals"` (float32 `[len(scalar_keys)]`) and `"histograms"`
            (`[len(histogram_keys), HIST_BUCKETS, 3]`), when there are any.
        scalar_keys: the tags of the signals, in order.
        histogram_keys: the tags of the histograms, in order.
        host_weights: `(tag, weight)` the host buckets after a histogram step.
    """

    outputs: dict = dataclasses.field(default_factory=dict)
    scalar_keys: list = dataclasses.field(default_factory=list)
    histogram_keys: list = dataclasses.field(default_factory=list)
    host_weights: tuple = ()


def record(model: keras.Model, context: MeasuredStep, records: list, x, y, wanted: SignalRequest,
           record_flag, histogram_flag) -> Recording:
    """The recording trace's signals: its scalars when `record_flag` holds, its histograms when `histogram_flag` does.

    One recording trace serves every step: the host's flags say what this
    step computes, each kind in a branch of its own, and a step that
    records nothing runs neither branch.
    """
    groups, hists, weights = build(model, context, records, x, y, wanted, bool(wanted.histograms))
    scalar_keys = [tag for group in groups for tag in group.tags]
    outputs = {}
    if groups:
        signals = tf.cond(tf.convert_to_tensor(record_flag), lambda: signals_of(groups),
                          lambda: tf.zeros([len(scalar_keys)]))
        outputs["signals"] = keep_cond_functional(signals)
    if hists:
        outputs["histograms"] = histograms_when(tf.convert_to_tensor(histogram_flag), hists)
    return Recording(outputs, scalar_keys, list(hists), tuple(weights))


def build(model: keras.Model, context: MeasuredStep, records: list, x, y, wanted: SignalRequest,
          histograms: bool) -> tuple[list[Group], dict, list]:
    """The scalar `Group`s; when `histograms`, `tag -> value` to bucket in the step, and `(tag, weight)` for the host.

    A value is a `Sample` (an activation), a gradient's row of the table
    bucketed at the optimizer's apply (`Bucketed`) or a gradient the interception did
    not see; `histograms.histograms_when` buckets them in the step, the
    host the weights after it (`histograms.HostHistograms`).
    """
    hists: dict = {}
    weights: list = []
    variables, grads, owners = _gradients(context)
    groups = gradient_groups(model, context)
    groups.extend(data_groups(x, y))
    seen: set[str] = set()
    named = []
    for layer, outputs in records:
        outs = float_leaves(outputs)
        if not outs or layer.name in seen:
            continue
        seen.add(layer.name)
        named.append((layer.name, stats.activation_kind(layer), outs[0]))
        if histograms and "activations" in wanted.histograms:
            hists[_tags.hist_activations(layer.name)] = Sample(outs[0])
    groups.extend(activation_groups(named))
    if histograms and "gradients" in wanted.histograms:
        for variable, grad in zip(variables, grads):  # bucketed at the optimizer's apply when it could be
            hists[_tags.hist_gradients(variable.path)] = context.gradient_buckets.get(id(variable), grad)
    if wanted.weights:
        _weight_signals(model, context, groups)
    if histograms and "weights" in wanted.histograms:
        weights = [(_tags.hist_weights(v.path), v) for v in model.weights if is_float(v)]  # non-trainable too
    return groups, hists, weights


def gradient_groups(model, context: MeasuredStep) -> list[Group]:
    """The gradient signals of the updates `context` saw (`grad_norm/*`, `zero_grad_fraction/*`), one `Group`.

    `model` names the layers (`layer_key`): anything with a `name`.
    """
    groups: list[Group] = []
    variables, grads, owners = _gradients(context)
    _gradient_signals(model, variables, grads, groups, context.gradient_stats, owners)
    return groups


def weight_groups(model, context: MeasuredStep) -> list[Group]:
    """`weight_norm/<layer>` and `update_ratio/<layer>` of the updates `context` saw and took the weights of."""
    groups: list[Group] = []
    _weight_signals(model, context, groups)
    return groups


def data_groups(x, y) -> list[Group]:
    """`data/input_*` of the measured input of `x`, `data/label_*` of the first target of `y` (either may be `None`)."""
    groups: list[Group] = []
    _input_signals(x, y, groups)
    return groups


def activation_groups(named: list) -> list[Group]:
    """`activation/dead_fraction/<name>` of the ReLU outputs and `activation/saturated_fraction/<name>` of the
    sigmoid and tanh ones, from `(name, kind, output)` (`kind` as `stats.activation_kind`; others are left out)."""
    groups: list[Group] = []
    relus: dict[str, tf.Tensor] = {}
    for name, kind, output in named:
        if kind == "relu":
            relus[_tags.dead_fraction(name)] = output
        elif kind in stats.SATURATING:
            groups.append(Group([_tags.saturated_fraction(name)],
                                lambda t=output, k=kind: stats.saturated_fraction(t, k)))
    if relus:
        outputs = list(relus.values())
        groups.append(Group(list(relus), lambda: stats.dead_fractions(outputs)))
    return groups


def signals_of(groups: list[Group]) -> tf.Tensor:
    """Every group's signals in one float32 vector, in the order of their tags."""
    parts, scalars = [], []
    for group in groups:
        value = tf.cast(group.compute(), tf.float32)
        if value.shape.rank == 0:
            scalars.append(value)
            continue
        if scalars:
            parts.append(tf.stack(scalars))
            scalars = []
        parts.append(value)
    if scalars:
        parts.append(tf.stack(scalars))
    return tf.concat(parts, axis=0) if len(parts) > 1 else parts[0]


def _gradients(context: MeasuredStep) -> tuple[list, list, list]:
    """Every (variable, gradient, optimizer) of the step's updates, unscaled, first update of a variable wins."""
    variables, grads, owners, seen = [], [], [], set()
    for update in context.updates:
        for variable, grad in zip(update.variables, update.unscaled()):
            if grad is None or id(variable) in seen:
                continue
            seen.add(id(variable))
            variables.append(variable)
            grads.append(tf.convert_to_tensor(grad))
            owners.append(update.optimizer)
    return variables, grads, owners


def optimizer_names(model, variables, owners) -> tuple[list[str], list[int]]:
    """The optimizers of a step, named for their tags, and each variable's optimizer index.

    An optimizer is named by the sub-model all its variables sit in when
    that tells the optimizers apart (a GAN's `critic` and `generator`), else
    by its own name (`adam`, `adam_1`).

    Example:

    >>> class V:
    ...     def __init__(self, path): self.path = path
    >>> class GAN: name = "gan"
    >>> a, b = object(), object()
    >>> optimizer_names(GAN(), [V("gan/critic/dense/kernel"), V("gan/generator/dense/kernel")], [a, b])
    (['critic', 'generator'], [0, 1])
    """
    order: dict[int, int] = {}
    index = [order.setdefault(id(owner), len(order)) for owner in owners]
    model_name = getattr(model, "name", None)
    prefixes: dict[int, set] = {}
    for variable, i in zip(variables, index):
        key = layer_key(variable, model_name)
        prefixes.setdefault(i, set()).add(key.split("/", 1)[0] if "/" in key else "")
    by_index = {i: owner for owner, i in ((o, order[id(o)]) for o in owners)}
    names = [next(iter(prefixes[i])) if len(prefixes[i]) == 1 else "" for i in range(len(order))]
    if "" in names or len(set(names)) < len(names):
        names = [str(getattr(by_index[i], "name", f"optimizer_{i}")) for i in range(len(order))]
    return names, index


def _by_layer(model, variables) -> tuple[list[str], list[int]]:
    """The layers of `variables` in first-seen order, and each variable's layer index."""
    positions: dict[str, int] = {}
    index = [positions.setdefault(layer_key(variable, model.name), len(positions)) for variable in variables]
    return list(positions), index


def _gradient_signals(model, variables, grads, groups, taken: dict | None = None,
                      owners=()) -> None:
    """The global gradient norm, then each layer's gradient norm and share of zero gradients.

    `taken` maps a variable's id to its row of an `apply_interception.gradient_table` taken at
    the optimizer's apply; the others are computed from the gradients here.

    A step with several optimizers (a GAN's, a WGAN-GP's critic and
    generator) also gets each optimizer's own gradient norm
    (`optimizer/grad_norm/<name>`), from the same squared norms.
    """
    if not grads:
        return
    layers, index = _by_layer(model, variables)
    taken = taken or {}
    names, by_optimizer = optimizer_names(model, variables, owners) if owners else ([], [])
    if len(names) < 2:
        names = []

    def compute():
        segments = tf.constant(index, tf.int32)
        fresh = [i for i, v in enumerate(variables) if id(v) not in taken]
        rows = {}
        if fresh:
            table = stats.gradient_rows([grads[i] for i in fresh])
            rows.update({i: (table, n) for n, i in enumerate(fresh)})
        table = stats.gather_rows([rows[i] if i in rows else taken[id(v)] for i, v in enumerate(variables)])
        squares, zeros, sizes = table[:, 0], table[:, 1], table[:, 2]
        by_layer = [tf.math.unsorted_segment_sum(v, segments, len(layers)) for v in (squares, zeros, sizes)]
        parts = [tf.sqrt(tf.reduce_sum(squares))[None], tf.sqrt(by_layer[0]),
                 by_layer[1] / tf.maximum(by_layer[2], 1.0)]
        if names:
            parts.append(tf.sqrt(tf.math.unsorted_segment_sum(
                squares, tf.constant(by_optimizer, tf.int32), len(names))))
        return tf.concat(parts, axis=0)

    groups.append(Group([_tags.GLOBAL_GRAD_NORM, *map(_tags.grad_norm, layers),
                         *map(_tags.zero_grad_fraction, layers),
                         *map(_tags.optimizer_grad_norm, names)], compute))


def _measured_input(inputs: list):
    """The input whose scale `data/input_*` measures: the first floating input, else the first
    integer input of rank 3 or more (pixels), else the first one.

    Integer inputs of rank 1 or 2 beside a floating one are ids or categories more often than
    numbers (token ids into an `Embedding` next to a float feature vector): their spread says
    nothing about normalization.
    """
    def rank(t) -> int:
        return t.shape.rank if t.shape.rank is not None else 0

    order = sorted(range(len(inputs)), key=lambda i: (
        0 if inputs[i].dtype.is_floating else 1 if rank(inputs[i]) >= 3 else 2, i))
    return inputs[order[0]]


def _input_signals(x, y, groups) -> None:
    inputs = [t for _, t in leaves("x", x) if t.dtype.is_floating or t.dtype.is_integer]
    if inputs:
        measured = _measured_input(inputs)

        def moments(first=measured):
            m = stats.moments(first)
            return tf.stack([m["min"], m["max"], m["mean"], m["std"]])

        groups.append(Group([_tags.INPUT_MIN, _tags.INPUT_MAX, _tags.INPUT_MEAN, _tags.INPUT_STD], moments))
    targets = [t for _, t in leaves("y", y) if t.dtype.is_floating or t.dtype.is_integer]
    if targets:
        target = targets[0]
        names = [_tags.LABEL_MIN, _tags.LABEL_MAX]
        multi = (target.dtype.is_floating and target.shape.rank is not None and target.shape.rank >= 2
                 and (target.shape[-1] is None or target.shape[-1] > 1))
        if multi:  # one-hot rows sum to 1; multi-hot rows (a multi-label problem) to more
            names.append(_tags.LABEL_ROW_SUM_MAX)

        def labels(t=target):
            t = tf.cast(t, tf.float32)
            values = [tf.reduce_min(t), tf.reduce_max(t)]
            if multi:
                values.append(tf.reduce_max(tf.reduce_sum(t, axis=-1)))
            return tf.stack(values)

        groups.append(Group(names, labels))


def _weight_signals(model, context: MeasuredStep, groups) -> None:
    """`weight_norm/<layer>` and `update_ratio/<layer>`: from the values the step took before the update
    (`MeasuredStep.before`), or, for a gated update or a large one, from the squared norms taken at its write."""
    members: list = []
    seen: set[int] = set()
    taken_at_write = context.weight_stats
    for update in context.updates:
        for variable in update.variables:
            key = id(tf_variable(variable))
            if key in seen or not is_float(variable):
                continue
            if key in taken_at_write or context.has_before(variable):
                seen.add(key)
                members.append((variable, taken_at_write.get(key)))
    if not members:
        return
    layers, index = _by_layer(model, [v for v, _ in members])

    def compute():
        segments = tf.constant(index, tf.int32)
        held = [variable for variable, taken in members if taken is None]
        rows = {}
        if held:  # the values before are read here, in the branch: a copied one exists only on recording steps
            table = _change_rows(context, held)
            rows = {id(variable): (table, n) for n, variable in enumerate(held)}
        squares = stats.gather_rows([taken if taken is not None else rows[id(variable)]
                                     for variable, taken in members])  # [k, 3]: before, change, after
        base, delta, weight = (tf.sqrt(tf.math.unsorted_segment_sum(squares[:, i], segments, len(layers)))
                               for i in range(3))
        ratio = tf.where(tf.equal(base, 0.0), tf.constant(NO_RATIO), delta / base)
        return tf.concat([weight, ratio], axis=0)

    groups.append(Group([*map(_tags.weight_norm, layers), *map(_tags.update_ratio, layers)], compute))


def _change_rows(context: MeasuredStep, variables: list) -> tf.Tensor:
    """`[k, 3]` of held weights, as `dry_run.change_table`: squared norms before, of the change and after.

    Weights of one shape are taken together, from the stack the step held
    or copied them in and one stack of their reads after: a deep model's
    hundreds of weights cost a few ops per shape, not six per weight.
    """
    groups = stack_groups([(tf_variable(v).shape, tf_variable(v).dtype) for v in variables])

    def stacked(group):
        members = [variables[i] for i in group]
        before = context.stacked_before(members)
        if before is None:
            before = tf.stack([context.before(v) for v in members])
        before = stats.as_float32(before)
        after = stats.as_float32(tf.stack([tf.convert_to_tensor(v) for v in members]))
        return tf.stack([stats.row_squares(before), stats.row_squares(after - before), stats.row_squares(after)],
                        axis=1)

    def alone(i):
        return dry_run.change_table([context.before(variables[i])], [tf.convert_to_tensor(variables[i])])[0]

    return stats.grouped_rows(groups, stacked, alone)


__all__ = ["NO_RATIO", "Group", "MeasuredStep", "Recording", "SignalRequest", "activation_groups", "build", "data_groups",
           "gradient_groups", "layer_key", "optimizer_names", "record", "signals_of", "weight_groups"]
