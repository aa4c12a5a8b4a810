"""Replicas: a guarded model under MirroredStrategy on two logical CPUs."""

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import numpy as np, tensorflow as tf, keras
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
    import tfguard
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
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
    program = "import sys\n" + PROGRAM
    result = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "SKIPPED [1.0, 1.0]" in result.stdout
    assert "ITER 6" in result.stdout  # 8 batches, 2 skipped
    assert "NREPLICA_VALUES 2" in result.stdout  # the comparison below really spans replicas
    assert "REPLICAS 2 IDENTICAL_AND_FINITE" in result.stdout
