"""The check stages of a guarded step, one builder each: flags as tensors, never a raise.

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

from tfguard._hooks.context import StepContext
from tfguard._hooks.functional_cond import keep_cond_functional
from tfguard._signals import stats
from tfguard._signals.buckets import groups_of
from tfguard.checks._contract import Contract, float_leaves

MUST_REJECT = ("loss", "gradients", "update")
UNCOUNTED = -1.0
"""The NaN/Inf counts of a flag judged by its sum alone (`counted_flag`): not taken."""
"""Stages whose failure is never applied, whatever the policy (it would poison the weights)."""


@dataclasses.dataclass(frozen=True)
class Slot:
    """One flag of the step: which stage, which tensor, which check."""

    stage: str
    where: str
    check: str

    @property
    def must_reject(self) -> bool:
        """Whether a failure here is never applied (`warn` too): loss, gradients, update, labels."""
        return self.stage in MUST_REJECT or self.check == "labels"


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
    counts: tf.Tensor | None = None  # a finiteness check already taken: [NaN, +Inf, -Inf, size]
    judged_with: tuple | None = None  # `(flags [n], counts [n, 4], row)`: taken with others, read by `stacked_flags`

    @property
    def finite(self) -> bool:
        """Whether this is a finiteness check (its NaN/Inf counts come back on failure)."""
        return self.tensor is not None or self.taken

    @property
    def taken(self) -> bool:
        """Whether this finiteness check was taken before the step's end (its counts are in hand)."""
        return self.tensor is None and (self.counts is not None or self.judged_with is not None)


def counted_flag(slot: Slot, tensor: tf.Tensor, reducer: stats.Reducer | None = None) -> Flag:
    """A finiteness flag taken now, so that `tensor` may die at once (its NaN/Inf counts are not taken).

    The flags a step decides on at its end keep their tensors alive until
    then, for their exact counts on failure; a value that must not outlive
    this point (a gradient or a dry-run update of a gated step, see
    `tfguard._firewall.gate`) is judged here by its sum alone. Counting its
    NaN/Inf values on failure would keep it alive too (a branch holds its
    inputs until it has run): its counts read `UNCOUNTED`, and a violation
    says which tensor, not how many values.

    Example:

    >>> flag = counted_flag(Slot("gradients", "g", "finite"), tf.constant([1.0, float("nan")]))
    >>> bool(flag.ok), flag.counts.numpy().tolist()
    (False, [-1.0, -1.0, -1.0, 2.0])
    """
    total = tensor.shape.num_elements()
    ok = tf.math.is_finite((reducer or stats.Reducer()).sum_of(tensor))
    if total is not None:  # one constant: a gated step judges hundreds of these, each a few ops at most
        counts = tf.constant([UNCOUNTED, UNCOUNTED, UNCOUNTED, float(total)])
    else:
        counts = tf.concat([tf.fill([3], UNCOUNTED), tf.cast(tf.size(tensor), tf.float32)[None]], axis=0)
    return Flag(slot, ok=ok, counts=counts)


def judged_together(slots: list[Slot], flags: tf.Tensor, counts: tf.Tensor) -> list[Flag]:
    """One taken flag per slot from the rows of one check (`finite_ok(..., counts=True)`).

    Such a flag has no `ok` or `counts` of its own: `stacked_flags` reads
    them back as the check's vectors themselves (a slice per flag and a new
    stack were two more ops per tensor, and three constants each).
    """
    return [Flag(slot, judged_with=(flags, counts, row)) for row, slot in enumerate(slots)]


def stacked_flags(flags: list[Flag], field: str) -> tf.Tensor:
    """`[n]` oks (`field="ok"`) or `[n, 4]` counts (`"counts"`) of taken flags, in order.

    Runs of flags judged together (`judged_together`) are read from their
    check's own vector (a gather when the run is not the whole of it, in
    order); any other flag is stacked.
    """
    parts, single, i = [], [], 0
    while i < len(flags):
        source = flags[i].judged_with
        if source is None:
            single.append(getattr(flags[i], field))
            i += 1
            continue
        rows = []
        while i < len(flags) and flags[i].judged_with is not None and flags[i].judged_with[0] is source[0]:
            rows.append(flags[i].judged_with[2])
            i += 1
        if single:
            parts.append(tf.stack(single))
            single = []
        vector = source[0] if field == "ok" else source[1]
        parts.append(vector if rows == list(range(int(vector.shape[0]))) else tf.gather(vector, rows))
    if single:
        parts.append(tf.stack(single))
    return parts[0] if len(parts) == 1 else tf.concat(parts, axis=0)


def finite_flags(stage: str, named: dict) -> list[Flag]:
    """One `finite` flag per float tensor: `where -> tensor` (computed by `finite_ok`)."""
    return [Flag(Slot(stage, where, "finite"), tensor=t) for where, t in named.items()]


def finite_ok(tensors: list[tf.Tensor], counts: bool = False, reducer: stats.Reducer | None = None):
    """Per tensor, whether every value is finite: a bool vector (and, with `counts`, the counts).

    A good step costs one sum per large tensor and one per shape for the
    small ones (`stats.Reducer.all_finite`): a finite sum means every value
    is finite. Only when a sum is not finite (a NaN or
    Inf, or a sum that overflowed) are the values counted one by one
    (`nonfinite_counts`), under a `tf.cond`, so the flags are exact.

    Example:

    >>> finite_ok([tf.constant([1.0, 2.0]), tf.constant([3e38, 3e38]), tf.constant([float("nan")])]).numpy()
    array([ True,  True, False])

    Args:
        tensors: float tensors.
        counts: also return the `[n, 4]` counts of `nonfinite_counts`
            (zeros on a good step). Defaults to `False`.
        reducer: the step's shared reductions (a sum already taken is
            reused). Defaults to a new one.

    Returns:
        The flags, or `(flags, counts)` with `counts`.
    """
    n = len(tensors)
    all_finite = (reducer or stats.Reducer()).all_finite(tensors)

    def exact():
        found = nonfinite_counts(tensors)
        flags = tf.equal(tf.reduce_sum(found[:, :3], axis=1), 0.0)
        return (flags, found) if counts else flags

    def good():
        flags = tf.ones([n], tf.bool)
        return (flags, tf.zeros([n, 4])) if counts else flags

    return keep_cond_functional(tf.cond(tf.logical_not(all_finite), exact, good))


COUNTED_AT_ONCE = 2**18
"""The most values `nonfinite_counts` counts together: a few MB of working memory (~20 bytes a value).

A larger tensor, or one whose size is known only at run time, is counted
that many values at a time, one block after another. Every counting
waits for the one before it, so a rejected step's counts cost about as
much memory as this many values, whatever the model's size (counted all
at once, a 2.7 M-parameter model's rejected step took +426 MB).
"""


def nonfinite_counts(tensors: list[tf.Tensor]) -> tf.Tensor:
    """`[n, 4]`: the NaN, +Inf and -Inf values of each tensor and its size.

    Consecutive small tensors are counted together (a few ops per run, not
    a dozen per tensor, `_counts_together`); a
    large one a block at a time (`COUNTED_AT_ONCE`). Each run waits for
    the one before it, so their working memory is not alive at once.

    Example:

    >>> nonfinite_counts([tf.constant([1.0, float("nan")]), tf.constant([[float("-inf")]])]).numpy().tolist()
    [[1.0, 0.0, 0.0, 2.0], [0.0, 0.0, 1.0, 1.0]]
    """
    found, waits = [], []
    for run in _counting_runs(tensors):
        with tf.control_dependencies(waits):
            if len(run) == 1 and _counted_by_block(tensors[run[0]]):
                counts = _counts_by_block(tensors[run[0]])[None]
            else:
                counts = _counts_together([tensors[i] for i in run])
        waits = [counts]
        found.append(counts)
    return found[0] if len(found) == 1 else tf.concat(found, axis=0)


def _counted_by_block(t: tf.Tensor) -> bool:
    size = t.shape.num_elements()
    return size is None or size > COUNTED_AT_ONCE


def _counting_runs(tensors: list[tf.Tensor]) -> list[list[int]]:
    """Indices of consecutive tensors counted together, at most `COUNTED_AT_ONCE` values a run; a large one alone."""
    return groups_of([t.shape.num_elements() for t in tensors], chunk=COUNTED_AT_ONCE)


def _kind_sums(values: tf.Tensor) -> tf.Tensor:
    """int32 `[3]`: the NaN, +Inf and -Inf values of a float vector."""
    kinds = tf.stack([tf.math.is_nan(values), tf.equal(values, float("inf")), tf.equal(values, float("-inf"))])
    return tf.reduce_sum(tf.cast(kinds, tf.int32), axis=1)


def _counts_by_block(t: tf.Tensor) -> tf.Tensor:
    """`[4]` counts of one tensor, `COUNTED_AT_ONCE` values at a time (a loop whose blocks run one after another)."""
    flat = tf.reshape(t, [-1])
    size = tf.size(flat)
    # Under XLA the loop's body is compiled for any size: a block never larger than the tensor (the sizes
    # are compile-time constants there).
    block = tf.maximum(tf.minimum(size, COUNTED_AT_ONCE), 1)
    blocks = size // block

    def body(i, total):
        return i + 1, total + _kind_sums(tf.slice(flat, [i * block], [block]))

    _, total = tf.while_loop(lambda i, _: i < blocks, body, (tf.constant(0), tf.zeros([3], tf.int32)),
                             parallel_iterations=1)
    total += _kind_sums(flat[blocks * block:])
    return tf.cast(tf.concat([total, size[None]], axis=0), tf.float32)


def _counts_together(tensors: list[tf.Tensor]) -> tf.Tensor:
    """`[k, 4]` counts of small tensors: flattened, concatenated, the three kinds summed by one cumulative sum read at each tensor's bounds.

    (Segment ids would be a constant as large as the values, which grappler folds into the graph.)
    """
    reducer = stats.Reducer()
    values = tf.concat([reducer.flat(_nonfinite_as_float32(t)) for t in tensors], axis=0)
    sizes = stats.sizes_of(tensors)
    kinds = tf.cast(tf.stack([tf.math.is_nan(values), tf.equal(values, float("inf")),
                              tf.equal(values, float("-inf"))], axis=1), tf.int32)
    running = tf.pad(tf.cumsum(kinds, axis=0), [[1, 0], [0, 0]])
    ends = tf.cumsum(sizes)
    found = tf.gather(running, ends) - tf.gather(running, ends - sizes)
    return tf.cast(tf.concat([found, sizes[:, None]], axis=1), tf.float32)


def _nonfinite_as_float32(t: tf.Tensor) -> tf.Tensor:
    """`t` as float32 with its NaN and Inf where they are (a float64 beyond float32's range is not an Inf)."""
    if t.dtype == tf.float64:
        t = tf.where(tf.math.is_finite(t), tf.zeros_like(t), t)
    return stats.as_float32(t)


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
        for variable, grad in zip(update.variables, update.dense_gradients()):
            if grad is None:
                continue
            label = f"gradient of '{variable_path(variable)}'"
            while label in named:
                label += "'"
            named[label] = update.gradient_flags.get(id(grad), grad)
    return [f if isinstance(f, Flag) else Flag(Slot("gradients", where, "finite"), tensor=f)
            for where, f in named.items()]


def update(context: StepContext, gate=None, final: bool = True) -> list[Flag]:
    """Every held float variable after the step (weights, moving statistics, optimizer slots).

    With a `gate` (`tfguard._firewall.gate.Gate`), a variable a gated update
    writes is judged by its dry run (the value it would have), and the
    others by their value at the gate, reused at the end unless something
    after the gate may have written them.
    """
    flags = []
    for held in context.transaction.checked():
        key = id(held.tf_variable)
        if gate is not None and key in gate.update_flags:
            flags.append(gate.update_flags[key])
            continue
        if gate is not None and key in gate.pending:
            continue
        value = gate.state_value(held, final) if gate is not None else tf.convert_to_tensor(held.tf_variable)
        flags.append(Flag(Slot("update", f"update of '{variable_path(held.variable)}'", "finite"), tensor=value))
    return flags


def variable_path(variable) -> str:
    """A variable's path as Keras names it (its name when it has no path)."""
    return getattr(variable, "path", None) or variable.name


__all__ = ["COUNTED_AT_ONCE", "MUST_REJECT", "UNCOUNTED", "Flag", "Slot", "counted_flag", "data", "finite_flags", "finite_ok",
           "forward", "gradients", "judged_together", "loss", "nonfinite_counts", "stacked_flags", "update",
           "variable_path"]
