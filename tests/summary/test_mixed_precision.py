"""Mixed precision: the loss scaler's skipped steps are normal, never logged as gradients, never diagnosed."""

import math

import keras
import numpy as np

import tfguard
from tests.summary.readback import read_run


def test_a_loss_scale_finding_its_scale_logs_no_gradient_of_its_skipped_steps(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu", dtype="mixed_float16"),
                              keras.layers.Dense(4, activation="softmax", dtype="float32")])
    # a scale far too large: the first steps' scaled float16 gradients overflow and are skipped
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-2), initial_scale=2.0**24)
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 8), dtype=np.float32), rng.integers(0, 4, 64)
    logger = tfguard.Logger(str(tmp_path), scalars_every=1, histograms_every=1)
    model.fit(x, y, batch_size=8, epochs=4, verbose=0, callbacks=[logger])
    assert float(optimizer.dynamic_scale.numpy()) < 2.0**24  # the scaler did skip steps
    run = read_run(logger.run_path)
    norms = run["grad_norm/global"]
    assert norms and all(math.isfinite(point.value) for point in norms)
    assert len(norms) < 32  # the skipped steps left no gradient norm
    findings = [f.id for run in tfguard.diagnose_logdir(str(tmp_path)) for f in run.findings]
    assert "nonfinite" not in findings
