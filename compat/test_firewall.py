"""The firewall on this pair: a NaN batch is rejected and every variable stays bitwise, in Keras's own
step, in a custom `train_step`, in graph mode and under XLA (`jit_compile=True`); `policy="raise"` names
the batch; a LossScaleOptimizer's skipped steps leave the step counter where the optimizer is."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest

import tfguard
from programs import bitwise_equal, bn_classifier, classification_data, custom_step_model, state_of

BAD_ROW = 20  # batch 1 of 16 rows


class StateAtBatch(keras.callbacks.Callback):
    """Every variable of the model, its metrics and its optimizer just before and after one batch."""

    def __init__(self, batch: int):
        super().__init__()
        self.batch, self.before, self.after = batch, None, None

    def on_train_batch_begin(self, batch, logs=None):
        if batch == self.batch:
            self.before = state_of(self.model, self.model.optimizer)

    def on_train_batch_end(self, batch, logs=None):
        if batch == self.batch:
            self.after = state_of(self.model, self.model.optimizer)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("program", [bn_classifier, custom_step_model], ids=["keras_step", "custom_step"])
def test_a_nan_batch_is_skipped_and_every_variable_stays_bitwise(program, jit_compile):
    model = program(jit_compile=jit_compile)
    x, y = classification_data()
    tfguard.guard(model, policy="skip", quarantine_dir=None)
    model.fit(x[:16], y[:16], batch_size=16, verbose=0)  # builds the optimizer and the metrics
    x[BAD_ROW] = np.nan
    spy = StateAtBatch(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tfguard.GuardWarning)  # the coverage note of a custom step
        history = model.fit(x, y, batch_size=16, shuffle=False, verbose=0, callbacks=[spy])
    assert model.jit_compile is jit_compile
    assert spy.before is not None and bitwise_equal(spy.before, spy.after)
    (event,) = tfguard.guard_events(model)
    assert (event.stage, event.action, event.epoch_batch) == ("data", "skipped", 1)
    assert history.history["guard_skipped"] == [1.0]
    assert all(np.isfinite(v).all() for v in state_of(model, model.optimizer) if v.dtype.kind == "f")


def test_raise_names_the_batch_and_applies_nothing(tmp_path):
    model = bn_classifier()
    x, y = classification_data()
    x[BAD_ROW, 2] = np.inf
    tfguard.guard(model, policy="raise", quarantine_dir=str(tmp_path / "quarantine"))
    with pytest.raises(tfguard.GuardViolation) as caught:
        model.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    assert caught.value.stage == "data" and caught.value.batch == 1
    assert "at batch 1" in str(caught.value)
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 1  # batch 0 only
    assert (tmp_path / "quarantine").is_dir()


def test_a_loss_scale_optimizer_counts_its_real_updates():
    """Mixed precision: the records follow the optimizer's real step, whichever object holds it."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="d")])
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1e-3), initial_scale=2.0**4)
    model.compile(optimizer=optimizer, loss="mse")
    seen = []
    tfguard.instrument(model).subscribe(lambda record: seen.append(record.step), scalars_every=1)
    x, y = classification_data(48)
    model.fit(x, np.eye(2, dtype="float32")[y % 2], batch_size=8, shuffle=False, verbose=0)
    assert seen == [1, 2, 3, 4, 5, 6]  # the step after each update (no overflow at scale 16)
