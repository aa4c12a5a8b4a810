"""The watch itself, driven by hand: once per check, every listener, a model built late, a failing check."""

from __future__ import annotations

import keras
import numpy as np

from tfguard._hooks import taps
from tfguard.invariants import forget, watch


class WithHead(keras.Model):
    """A subclassed model with an extra head that `call` never uses (built lazily)."""

    def __init__(self):
        super().__init__(name="with_head")
        self.body = keras.layers.Dense(2, name="body")
        self.head = keras.layers.Dense(1, name="aux_head")

    def call(self, x):
        return self.body(x)


def _batch(rows=8):
    rng = np.random.default_rng(0)
    return rng.normal(size=(rows, 3)).astype("float32"), rng.normal(size=(rows, 2)).astype("float32")


def test_a_model_built_in_its_first_step_is_fingerprinted_after_it():
    model = WithHead()
    model.compile(optimizer="sgd", loss="mse")
    w = watch(model)
    seen_a, seen_b = [], []
    w.add_listener(seen_a.append)
    w.add_listener(seen_b.append)
    w.add_listener(seen_a.append)  # the same listener twice: called once
    w.begin_fit()
    assert w.fingerprints is None  # nothing built yet
    x, y = _batch()
    model(x)
    model.head(x)  # both built, as a first step would
    w.on_batch((x, y, None))
    assert w.fingerprints is not None and "trained_unused" not in [r["check"] for r in seen_a]
    for variable in (model.head.kernel, model.head.bias, model.body.kernel):  # "training"
        variable.assign(variable + 0.1)
    w.end_epoch(0)
    w.end_epoch(0)  # a second callback at the same epoch end: nothing runs again
    checks = [r["check"] for r in seen_a]
    assert seen_a == seen_b and len(checks) == len(set(checks))
    (unused,) = [r for r in seen_a if r["check"] == "trained_unused"]
    assert not unused["ok"] and unused["evidence"]["variables"] == ["aux_head/kernel",
                                                                       "aux_head/bias"]
    assert unused["where"] == "aux_head" and unused["evidence"]["attributes"] == ["head"]
    assert w.seconds > 0
    forget(model)


def test_a_check_that_cannot_run_is_kept_as_an_error_and_training_goes_on():
    class Broken(keras.Model):
        def call(self, x):
            if x.shape[0] != 8:  # refuses any batch but the one it trained on
                raise ValueError("expected 8 rows")
            return x

    model = Broken()
    model.compile(optimizer="sgd", loss="mse")
    w = watch(model)
    w.begin_fit()
    x, y = _batch()
    w.on_batch((x, x, None))
    assert any("expected 8 rows" in e for e in w.errors)
    assert "batch_dependence" not in [r["check"] for r in w.records]
    forget(model)


class Seen(keras.layers.Layer):
    """A layer that counts the calls made while the probes record layer outputs (a tap on it)."""

    recorded = 0

    def call(self, x):
        if taps.is_tapped(self):
            Seen.recorded += 1
        return x * 2.0


class Net(keras.Model):
    """Dense -> Seen -> Dropout; `leak`: the Dropout's `training=True` hard-coded."""

    def __init__(self, leak: bool):
        super().__init__(name="net")
        self.dense, self.seen, self.drop = keras.layers.Dense(4), Seen(), keras.layers.Dropout(0.5, name="drop")
        self.leak = leak

    def call(self, x, training=None):
        return self.drop(self.seen(self.dense(x)), training=True if self.leak else training)


def test_the_inference_checks_record_layer_outputs_only_to_name_a_layer_at_fault():
    # Every layer's outputs of every pass, kept to compare: ResNet50 at 32 examples peaked ~300 MB higher
    # at the first step. Outputs are compared first; layers are recorded only when they differ.
    x = _batch(rows=16)[0]
    for leak, recorded in ((False, 0), (True, 2)):
        model = Net(leak)
        model.compile(optimizer="sgd", loss="mse")
        model(x)
        w = watch(model)
        w.begin_fit()
        Seen.recorded = 0
        w.on_batch((x, np.zeros((16, 4), "float32"), None))
        checks = {r["check"]: r for r in w.records}
        assert Seen.recorded == recorded  # the leak: two more passes, every layer recorded
        assert checks["training_mode_leak"]["ok"] is not leak
        if leak:
            assert checks["training_mode_leak"]["where"].endswith("drop")
        else:
            assert checks["batch_dependence"]["ok"]
        forget(model)


def test_a_model_of_one_batch_size_still_says_which_variables_it_reads():
    class EightRows(WithHead):
        def call(self, x):
            if x.shape[0] != 8:  # a stateful RNN takes its one batch size only
                raise ValueError("expected 8 rows")
            return self.body(x)

    model = EightRows()
    model.compile(optimizer="sgd", loss="mse")
    w = watch(model)
    w.begin_fit()
    x, y = _batch()
    model(x)
    model.head(x)
    w.on_batch((x, y, None))
    assert w.read == {model.body.kernel.path, model.body.bias.path}
    forget(model)
