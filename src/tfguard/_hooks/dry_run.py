"""An optimizer update computed without being written: the values it would assign.

A guarded step must reject an update whose result is not finite (an
`SGD(learning_rate=1e38)` overflows float32 with finite gradients) and
leave the model bitwise as it was. Holding every weight and slot across the
step to put them back costs one more copy of the model's whole state. A dry
run costs nothing held: it computes, in the graph, what the optimizer's own
`apply` would assign (weights after clipping, weight decay, the update rule
and constraints; every slot; `iterations`), inside a Keras
`StatelessScope`, so nothing is written. The guard reduces each value to a
finiteness flag as soon as it exists (the values die there, one update's
worth at a time) and runs the real `apply` only when every flag holds.

The dry run uses the optimizer's backend-neutral methods
(`BaseOptimizer.assign`, `assign_add`, `assign_sub`, `_apply_weight_decay`,
and a per-variable loop of `update_step` on the Keras variables, through
`keras_compat.neutral_writes`), whose writes a `StatelessScope` captures;
the TensorFlow backend's own versions write `tf.Variable`s directly and
would escape it. What an optimizer's class overrides itself runs as it is
(Nadam advances `_u_product` in its `_backend_update_step`). Optimizers it cannot follow
(gradient accumulation and an EMA that overwrites the weights, both writing
inside a `cond`) get `None`: the guard holds their state instead.

Example:

>>> import keras, tensorflow as tf
>>> w = keras.Variable([1.0, 2.0], name="w")
>>> sgd = keras.optimizers.SGD(learning_rate=0.5)
>>> sgd.build([w])
>>> [(v.name, value.numpy().tolist()) for v, value in dry_run(sgd, [tf.constant([1.0, 1.0])], [w])][:1]
[('w', [0.5, 1.5])]
>>> w.numpy().tolist()  # nothing was written
[1.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Generator

import keras
import tensorflow as tf

from tfguard._hooks import keras_compat


def supports(optimizer) -> bool:
    """Whether `dry_run` can follow `optimizer`'s `apply` (no accumulation, no overwriting EMA)."""
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return False
    if getattr(optimizer, "gradient_accumulation_steps", None):
        return False
    return not (getattr(optimizer, "use_ema", False) and getattr(optimizer, "ema_overwrite_frequency", None))


CHUNK_BYTES = 4 * 2**20
"""Variables updated together in one dry-run step: at most this many bytes of them (a larger one alone)."""


def _chunks(pairs: list, limit: int) -> list[list]:
    """`(gradient, variable)` pairs in runs of consecutive variables of at most `limit` bytes together.

    >>> [len(c) for c in _chunks([(None, tf.zeros([4]))] * 5, 32)]
    [2, 2, 1]
    """
    chunks, current, size = [], [], 0
    for pair in pairs:
        bytes_ = state_bytes([pair[1]])
        if current and size + bytes_ > limit:
            chunks.append(current)
            current, size = [], 0
        current.append(pair)
        size += bytes_
    return chunks + ([current] if current else [])


def runs(optimizer, grads: list, variables: list, after=None,
         chunk_bytes: int = CHUNK_BYTES) -> Generator[list, object, None]:
    """What `optimizer.apply(grads, variables)` would assign, a run of consecutive variables at a time.

    A generator the caller drives: it yields each run's `[(variable,
    value), ...]` (its weights, then their slots and `iterations`) and is
    sent back a tensor the next run's dry run waits for (or `None`). Each
    run of at most `chunk_bytes` of variables (a large variable is a run
    alone) is computed in its own `StatelessScope`, after what the caller
    sent for the previous run, so what is alive at once is one run's values,
    as in the real apply, when the caller reduces them before sending; the
    optimizer's own preamble (learning rate, iterations) is traced once per
    run, not once per variable. Gradients are clipped together first when
    the optimizer clips by the global norm. The caller's code runs in the
    caller: nothing here calls it. Until the generator is exhausted or
    closed, the optimizer writes through its backend-neutral methods (and
    does not clip by the global norm again): a caller that may stop early
    closes it (`contextlib.closing`). The optimizer must be one `supports` takes.

    Example:

    >>> w = keras.Variable([1.0, 2.0], name="w")
    >>> sgd = keras.optimizers.SGD(learning_rate=0.5)
    >>> sgd.build([w])
    >>> steps = runs(sgd, [tf.constant([1.0, 1.0])], [w])
    >>> first = next(steps)  # the caller's work on it here, then what the next run waits for
    >>> [v.name for v, _ in first], next(steps, None)
    (['w', 'iteration'], None)

    Args:
        optimizer: a built Keras optimizer.
        grads: the gradients, as `apply` would get them (`None` entries allowed).
        variables: the trainable variables they update.
        after: a tensor the first run's dry run waits for. Defaults to `None`.
        chunk_bytes: the most bytes of variables in one run (`CHUNK_BYTES`);
            0: one variable at a time.
    """
    grads, variables = list(grads), list(variables)
    clip = getattr(optimizer, "global_clipnorm", None)
    if clip:
        pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]
        clipped = iter(keras_compat.clip_gradients(optimizer, [g for g, _ in pairs]))
        grads = [None if g is None else next(clipped) for g in grads]
    seen, previous = set(), after
    with keras_compat.neutral_writes(optimizer, variables):
        if clip:  # clipped together above: the per-variable applies must not clip again
            object.__setattr__(optimizer, "global_clipnorm", None)
        try:
            for chunk in _chunks([(g, v) for g, v in zip(grads, variables) if g is not None], chunk_bytes):
                with tf.control_dependencies([previous] if previous is not None else []), \
                        keras.StatelessScope() as scope:
                    keras_compat.neutral_apply(optimizer, [g for g, _ in chunk], [v for _, v in chunk])
                mine = []
                for candidate in [*(v for _, v in chunk), *optimizer.variables]:
                    value = scope.get_current_value(candidate)
                    if value is not None and id(candidate) not in seen:
                        mine.append((candidate, value))
                seen.update(id(v) for _, v in chunk)
                seen.update(id(c) for c, _ in mine if c is not optimizer.iterations)
                previous = yield mine
        finally:
            if clip:
                object.__setattr__(optimizer, "global_clipnorm", clip)


def dry_run(optimizer, grads: list, variables: list,
            chunk_bytes: int = CHUNK_BYTES) -> list[tuple[object, object]] | None:
    """`(variable, value)` for every variable `optimizer.apply(grads, variables)` would assign (`runs`, all of them).

    Returns:
        The values in the order the update assigns them (each run's weights,
        then their slots and `iterations`), or `None` when `supports(optimizer)` is false.
    """
    if not supports(optimizer):
        return None
    written = []
    for run in runs(optimizer, grads, variables, chunk_bytes=chunk_bytes):
        written += [(c, v) for c, v in run if not any(c is w for w, _ in written)]
    return written


def state_bytes(variables) -> int:
    """The bytes of `variables` (shapes known at trace time; unknown sizes count 0)."""
    total = 0
    for variable in variables:
        size = tf.TensorShape(variable.shape).num_elements()
        if size:
            total += size * tf.as_dtype(variable.dtype).size
    return total


def optimizer_slots(model) -> list:
    """The variables of `model`'s built optimizers: their slots, iterations and learning rates.

    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> m.compile(optimizer="adam", loss="mse")
    >>> optimizer_slots(m)  # not built before its first update
    []
    """
    return [v for optimizer in keras_compat.optimizers_of(model) if optimizer.built for v in optimizer.variables]


def model_state_bytes(model) -> int:
    """The bytes of `model`'s variables and of its built optimizers' (what a step of it may hold)."""
    return state_bytes([*model.variables, *optimizer_slots(model)])


def weight_table(members: list, record_flag) -> tf.Tensor:
    """On recording steps, `[k, 3]` float32: each weight's squared norm before, of its change and after.

    `members` are `(variable, value it will have)`. The variables are read
    inside the branch, before the update writes them (the update waits for
    the table), so no value read here outlives the write.
    """
    variables = [v.value if isinstance(v, keras.Variable) else v for v, _ in members]
    values = [value for _, value in members]

    def compute():
        return change_table([tf.convert_to_tensor(v) for v in variables], values)

    return tf.cond(tf.convert_to_tensor(record_flag), compute, lambda: tf.zeros([len(members), 3]))


def weight_table_across(members: list, befores: list, record_flag) -> tf.Tensor:
    """`weight_table` of an update that is not dry-run: from values read before its write and after it.

    Call it once the update's `apply` is in the graph: the values after are
    read here, so each waits for its own variable's write. `befores` were
    read at the update's apply (`tfguard._firewall.apply_interception`), before the apply. The table
    is a lowered `tf.cond` (one `Switch` per value, not one `If` holding
    them all): each variable's value before dies as soon as its row is
    taken, so the write copies one variable at a time at most, on
    recording steps, and no variable on the others. No dry run: the graph
    grows by a few ops per variable, not by a second optimizer update.

    Args:
        members: the `k` variables the update wrote.
        befores: their values before the update, in the same order.
        record_flag: the bool variable that says a step records.

    Returns:
        The `[k, 3]` table: each weight's squared norm before, of its change and after.
    """
    afters = [tf.convert_to_tensor(v.value if isinstance(v, keras.Variable) else v) for v in members]

    return tf.cond(tf.convert_to_tensor(record_flag), lambda: change_table(befores, afters),
                   lambda: tf.zeros([len(members), 3]))


def change_table(befores: list, afters: list) -> tf.Tensor:
    """`[k, 3]` float32: each weight's squared norm before, of its change and after, from its two values.

    The one table behind weight norms and update ratios, whichever way the
    values were taken (a dry run, across a write, or held by the step).

    >>> change_table([tf.constant([3.0, 4.0])], [tf.constant([3.0, 5.0])]).numpy().tolist()
    [[25.0, 1.0, 34.0]]
    """
    old = [tf.cast(t, tf.float32) for t in befores]
    new = [tf.cast(t, tf.float32) for t in afters]
    return tf.stack([_squares(old), _squares([n - o for n, o in zip(new, old)]), _squares(new)], axis=1)


def _squares(tensors: list) -> tf.Tensor:
    """`[n]`: the squared norm of each float32 tensor."""
    return 2.0 * tf.stack([tf.nn.l2_loss(t) for t in tensors])


__all__ = ["CHUNK_BYTES", "change_table", "dry_run", "model_state_bytes", "optimizer_slots", "runs", "state_bytes", "supports", "weight_table", "weight_table_across"]
