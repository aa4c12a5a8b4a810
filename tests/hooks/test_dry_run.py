"""The dry run computes what an optimizer's apply would write, bitwise, and writes nothing."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfguard._hooks import dry_run, keras_compat

OPTIMIZERS = {
    "adam": lambda: keras.optimizers.Adam(1e-2),
    "adamw_global_clipnorm": lambda: keras.optimizers.AdamW(1e-2, weight_decay=0.1, global_clipnorm=0.5),
    "sgd_nesterov_clipvalue": lambda: keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True, clipvalue=0.1),
    "rmsprop": lambda: keras.optimizers.RMSprop(1e-2),
    "adafactor": lambda: keras.optimizers.Adafactor(),
    "nadam": lambda: keras.optimizers.Nadam(1e-2),  # its own _backend_update_step advances _u_product first
    "muon_weight_decay": lambda: keras.optimizers.Muon(1e-2),  # its own _apply_weight_decay
}
ROUNDED = {"muon_weight_decay"}
"""Equal up to float rounding (measured within 1e-6): Muon's sums (`m + (g + m * (momentum - 1))`) are
separate graph ops in the dry run, which grappler may fuse or reorder, and an `AssignAddVariableOp` in the
real apply. The dry run only judges finiteness; the real apply writes."""


@pytest.mark.parametrize("chunk_bytes", [0, dry_run.CHUNK_BYTES], ids=["one_variable_at_a_time", "in_runs"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_the_dry_run_is_the_update_bitwise_and_writes_nothing(name, chunk_bytes):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, kernel_constraint=keras.constraints.MaxNorm(1.0)),
                              keras.layers.Dense(3)])
    optimizer = OPTIMIZERS[name]()
    optimizer.build(model.trainable_variables)
    x = tf.constant(np.random.default_rng(0).random((16, 4)), tf.float32)
    y = tf.constant(np.random.default_rng(1).random((16, 3)), tf.float32)
    state = list(model.trainable_variables) + list(optimizer.variables)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        written = dry_run.dry_run(optimizer, grads, model.trainable_variables, chunk_bytes=chunk_bytes)
        values = {id(v): tf.identity(value) for v, value in written}
        before = [tf.identity(v.value) for v in state]
        with tf.control_dependencies([*values.values(), *before]):
            optimizer.apply(grads, model.trainable_variables)
        return {i: values[id(v)] for i, v in enumerate(state) if id(v) in values}, before

    for _ in range(2):
        start = [v.numpy().copy() for v in state]
        values, before = step()
        assert all(np.array_equal(b.numpy(), s) for b, s in zip(before, start))  # nothing written by the dry run
        after = [v.numpy() for v in state]
        assert len(values) >= len(model.trainable_variables)
        for i, value in values.items():
            if name in ROUNDED:
                np.testing.assert_allclose(value.numpy(), after[i], rtol=1e-6, atol=1e-7, err_msg=state[i].path)
            else:
                assert np.array_equal(value.numpy(), after[i]), state[i].path
        changed = [i for i in range(len(state)) if not np.array_equal(start[i], after[i])]
        assert set(changed) <= set(values)  # every variable the apply changed was in the dry run


def test_optimizers_it_cannot_follow_get_none():
    w = keras.Variable([1.0])
    accumulating = keras.optimizers.SGD(0.1, gradient_accumulation_steps=2)
    accumulating.build([w])
    assert dry_run.dry_run(accumulating, [tf.constant([1.0])], [w]) is None
    assert not dry_run.supports(keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD()))


def test_runs_of_variables_keep_their_order_and_a_large_one_stands_alone():
    pairs = [(None, tf.zeros([n])) for n in (4, 4, 100, 4)]
    assert [[int(v.shape[0]) for _, v in run] for run in dry_run._chunks(pairs, 64)] == [[4, 4], [100], [4]]
    assert [len(run) for run in dry_run._chunks(pairs, 0)] == [1, 1, 1, 1]


@pytest.mark.parametrize("recording", [True, False])
def test_weight_table_across_a_write_is_the_squared_norms_before_of_the_change_and_after(recording):
    w = keras.Variable([[3.0, 4.0], [0.0, 0.0]])
    b = keras.Variable([1.0, -1.0])
    flag = tf.Variable(recording)

    @tf.function
    def step():
        befores = [tf.convert_to_tensor(w.value), tf.convert_to_tensor(b.value)]  # read before the write
        w.assign_add([[1.0, 0.0], [0.0, 2.0]])
        b.assign([1.0, 1.0])
        return dry_run.weight_table_across([w, b], befores, flag)

    table = step().numpy().tolist()
    expected = [[25.0, 5.0, 36.0], [2.0, 4.0, 2.0]] if recording else [[0.0] * 3] * 2
    np.testing.assert_allclose(table, expected)


def test_the_caller_drives_the_runs_and_each_run_waits_for_what_it_sent_back():
    # One run at a time, computed after the caller has reduced the one before: the values of two runs
    # are never alive at once, and the caller's work runs in the caller (nothing here calls it).
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4), keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam(1e-2)
    optimizer.build(model.trainable_variables)
    seen = {}

    @tf.function(autograph=False)
    def step():
        grads = [tf.ones_like(v) for v in model.trainable_variables]
        steps = dry_run.runs(optimizer, grads, model.trainable_variables, chunk_bytes=0)
        runs, sent = [next(steps)], []
        while True:
            marker = tf.add_n([tf.reduce_sum(tf.cast(value, tf.float32)) for _, value in runs[-1]], name="marker")
            sent.append(marker)
            try:
                runs.append(steps.send(marker))
            except StopIteration:
                break
        graph = tf.compat.v1.get_default_graph()
        trainable = {id(v) for v in model.trainable_variables}
        seen["runs"] = [[v.path for v, _ in run if id(v) in trainable] for run in runs]
        seen["waits"] = [any(m.op in op.control_inputs for op in graph.get_operations()) for m in sent]
        return tf.constant(0)

    step()
    assert seen["runs"] == [[v.path] for v in model.trainable_variables]  # one variable a run
    assert seen["waits"] == [True, True, True, False]  # each run but the first waited for the one before


def test_runs_closed_early_put_the_optimizer_back_as_it_was():
    # While the caller drives the runs the optimizer writes through its neutral methods and does not clip
    # again; a caller that stops (its own code failed) closes the generator and gets its optimizer back.
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4), keras.layers.Dense(2)])
    optimizer = keras.optimizers.AdamW(1e-2, global_clipnorm=1.0)
    optimizer.build(model.trainable_variables)
    patched = {*keras_compat.NEUTRAL_WRITES, "_var_key"}
    assert not patched & vars(optimizer).keys()
    grads = [tf.ones_like(v) for v in model.trainable_variables]
    steps = dry_run.runs(optimizer, grads, model.trainable_variables, chunk_bytes=0)
    next(steps)
    assert optimizer.global_clipnorm is None and "assign" in vars(optimizer)  # the dry run's, while it runs
    steps.close()
    assert optimizer.global_clipnorm == 1.0 and not patched & vars(optimizer).keys()
