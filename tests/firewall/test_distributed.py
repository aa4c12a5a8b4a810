"""Replicas: a guarded model under MirroredStrategy on two logical CPUs."""

import textwrap

from tests.firewall import replicas

PROGRAM = textwrap.dedent(
    """
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(3, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    tfguard.guard(model, policy="skip", quarantine_dir=sys.argv[1])
    x = np.random.default_rng(0).random((64, 4), dtype=np.float32)
    x[20, 0] = np.nan   # second half of the second global batch of 16: one replica only
    y = np.arange(64) % 3
    history = model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    print("SKIPPED", history.history["guard_skipped"])
    print("NREPLICA_VALUES", len(strategy.experimental_local_results(model.trainable_variables[0].value)))
    print("ITER", int(model.optimizer.iterations.numpy()))
    for v in model.trainable_variables:
        values = [t.numpy() for t in strategy.experimental_local_results(v.value)]
        assert all(np.array_equal(values[0], other) for other in values[1:]), v.path
        assert np.isfinite(values[0]).all(), v.path
    print("REPLICAS", strategy.num_replicas_in_sync, "IDENTICAL_AND_FINITE")
    """
)


def test_a_skip_is_decided_identically_on_every_replica(tmp_path):
    result = replicas.run(PROGRAM, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "SKIPPED [1.0, 1.0]" in result.stdout
    assert "ITER 6" in result.stdout  # 8 batches, 2 skipped
    assert "NREPLICA_VALUES 2" in result.stdout  # the comparison below really spans replicas
    assert "REPLICAS 2 IDENTICAL_AND_FINITE" in result.stdout


STATE_PROGRAM = textwrap.dedent(
    """
    with strategy.scope():
        inputs = keras.Input((4,))
        h = keras.layers.Dense(8)(inputs)
        h = keras.layers.BatchNormalization(name="bn")(h)
        outputs = keras.layers.Dense(3, activation="softmax")(keras.layers.Activation("relu")(h))
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                      jit_compile=sys.argv[1] == "xla")
    tfguard.guard(model, policy="skip", quarantine_dir=None)
    x = np.random.default_rng(0).random((32, 4), dtype=np.float32)
    y = np.arange(32) % 3
    model.fit(x[:16], y[:16], batch_size=16, verbose=0)

    def state():
        out = []
        for v in list(model.variables) + list(model.optimizer.variables):
            out.extend(np.array(t) for t in strategy.experimental_local_results(v.value))
        return out

    before = state()
    bad = x[16:].copy()
    bad[12, 0] = np.nan  # the second replica's half only
    history = model.fit(bad, y[16:], batch_size=16, verbose=0)
    after = state()
    print("SKIPPED", history.history["guard_skipped"])
    print("COMPARED", len(before))
    print("BITWISE", all(a.tobytes() == b.tobytes() for a, b in zip(before, after)))
    """
)


def test_every_replica_rolls_back_weights_statistics_and_slots():
    # graph mode only: XLA cannot compile a step whose variables live on two logical CPUs, with
    # or without tfguard ("Trying to access resource ... from device"); XLA is tested on one device
    result = replicas.run(STATE_PROGRAM, "graph")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "SKIPPED [1.0]" in result.stdout
    compared = int(result.stdout.split("COMPARED ")[1].split()[0])
    assert compared >= 2 * 8  # weights, BN statistics and slots, on both replicas
    assert "BITWISE True" in result.stdout
