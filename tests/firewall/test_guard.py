import json
import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfguard
from tests.conftest import deep_mlp, optimizer_state, small_classifier, traced_step, weights_of
from tests.firewall import foreign
from tfguard import GuardViolation, checks


def poisoned(x, row=5):
    bad = x.copy()
    bad[row, 1] = np.nan
    return bad


def test_skip_leaves_weights_and_optimizer_state_untouched(classifier, data, tmp_path):
    x, y = data
    model = tfguard.guard(classifier, policy="skip", quarantine_dir=str(tmp_path))
    model.train_on_batch(x[:16], y[:16])  # build optimizer state with a good step
    before, state = weights_of(model), optimizer_state(model)
    model.train_on_batch(poisoned(x[:16]), y[:16])
    assert all(np.array_equal(a, b) for a, b in zip(before, weights_of(model)))
    assert all(np.array_equal(a, b) for a, b in zip(state, optimizer_state(model)))
    model.train_on_batch(x[:16], y[:16])
    assert not all(np.array_equal(a, b) for a, b in zip(before, weights_of(model)))


def test_a_model_fitted_before_it_was_guarded_is_guarded_on_its_next_fit(data, tmp_path):
    # A notebook's order: fit, see trouble, guard. Keras keeps the train function of the
    # first fit; the guard must not leave that unguarded step in place.
    x, y = data
    model = keras.Sequential([keras.Input((x.shape[1],)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.BatchNormalization(), keras.layers.Dense(3)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x[:32], y[:32], batch_size=16, epochs=1, verbose=0)
    model = tfguard.guard(model, policy="skip", quarantine_dir=str(tmp_path), localize=False)
    before, state = weights_of(model), optimizer_state(model)
    history = model.fit(poisoned(x[:16]), y[:16], batch_size=16, epochs=1, verbose=0)
    assert history.history["guard_skipped"] == [1.0]
    assert [event.stage for event in tfguard.guard_events(model)] == ["data"]
    # every weight, the BatchNormalization moving statistics included, bitwise as before
    assert all(np.array_equal(a, b) for a, b in zip(before, weights_of(model)))
    assert all(np.array_equal(a, b) for a, b in zip(state, optimizer_state(model)))


def test_skip_counts_show_in_history_and_training_continues(classifier, data, tmp_path):
    x, y = data
    model = tfguard.guard(classifier, policy="skip", quarantine_dir=str(tmp_path))
    history = model.fit(poisoned(x), y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    assert history.history["guard_violations"] == [1.0, 1.0]
    assert history.history["guard_skipped"] == [1.0, 1.0]
    assert np.isfinite(history.history["loss"]).all()
    assert all(np.isfinite(w).all() for w in weights_of(model))


def test_raise_names_stage_tensor_step_counts_and_quarantines(classifier, data, tmp_path):
    x, y = data
    model = tfguard.guard(classifier, policy="raise", quarantine_dir=str(tmp_path))
    model.fit(x[:16], y[:16], batch_size=16, epochs=1, verbose=0)
    good = weights_of(model)
    with pytest.raises(GuardViolation) as info:
        model.fit(poisoned(x[:16]), y[:16], batch_size=16, epochs=1, verbose=0)
    error = info.value
    assert error.stage == "data" and error.where == "x" and error.step == 1
    assert error.counts["nan"] == 1
    assert "x at step 1 has" not in str(error)  # data checks word their own counts
    assert "1 NaN, 0 +Inf, 0 -Inf of 64 values" in str(error)
    assert "The update was not applied" in str(error)
    assert "Try:" in str(error)
    assert all(np.array_equal(a, b) for a, b in zip(good, weights_of(model)))
    with open(os.path.join(error.quarantine, "meta.json")) as handle:
        meta = json.load(handle)
    assert meta["step"] == 1 and meta["stage"] == "data"
    batch = np.load(os.path.join(error.quarantine, "batch.npz"), allow_pickle=False)
    assert np.isnan(batch["x::"]).sum() == 1


def test_warn_applies_a_finite_update_but_never_a_non_finite_one(classifier, data, tmp_path):
    x, y = data
    contract = checks.Contract(x=[checks.in_range(0, 0.5)])
    model = tfguard.guard(classifier, policy="warn", data=contract, quarantine_dir=str(tmp_path))
    model.train_on_batch(x[:16], y[:16])
    before = weights_of(model)
    with pytest.warns(tfguard.GuardWarning, match="failed check 'range'"):
        model.train_on_batch(x[16:32], y[16:32])
    assert not all(np.array_equal(a, b) for a, b in zip(before, weights_of(model)))
    before = weights_of(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.train_on_batch(poisoned(x[:16]) * 0 + np.inf, y[:16])
    assert any("The update was not applied" in str(w.message) for w in caught)
    assert all(np.array_equal(a, b) for a, b in zip(before, weights_of(model)))


def test_consecutive_skips_stop_training_with_a_clear_error(classifier, data, tmp_path):
    x, y = data
    model = tfguard.guard(
        classifier, policy="skip", max_consecutive_skips=2, quarantine_dir=str(tmp_path)
    )
    all_bad = np.full_like(x, np.nan)
    with pytest.raises(GuardViolation, match="stopped after 3 consecutive skipped steps"):
        model.fit(all_bad, y, batch_size=8, epochs=1, verbose=0)
    assert all(np.isfinite(w).all() for w in weights_of(model))


def test_labels_are_checked_against_output_units_inferred_from_the_loss(classifier, data, tmp_path):
    x, y = data
    model = tfguard.guard(classifier, policy="raise", quarantine_dir=str(tmp_path))
    labels = y.copy()
    labels[3] = 7
    with pytest.raises(GuardViolation, match=r"labels outside the class ids \[0, 3\)"):
        model.fit(x, labels, batch_size=64, verbose=0)


def test_xla_checks_still_detect_and_the_policy_still_acts(data, tmp_path):
    x, y = data
    keras.utils.set_random_seed(0)
    model = tfguard.guard(
        small_classifier(jit_compile=True), policy="skip", quarantine_dir=str(tmp_path)
    )
    history = model.fit(poisoned(x), y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    assert model.jit_compile is True
    assert history.history["guard_skipped"] == [1.0]
    assert all(np.isfinite(w).all() for w in weights_of(model))


def test_xla_strips_tf_debugging_asserts_which_is_why_guard_uses_flags():
    @tf.function(jit_compile=True)
    def asserted(t):
        tf.debugging.assert_all_finite(t, "must be finite")
        return t + 1

    out = asserted(tf.constant([np.nan]))  # no error: the assert compiled to nothing
    assert np.isnan(out.numpy()).all()


def test_guard_before_compile_on_a_subclassed_model(data, tmp_path):
    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = keras.layers.Dense(8, activation="relu")
            self.out = keras.layers.Dense(3, activation="softmax")

        def call(self, inputs):
            return self.out(self.hidden(inputs))

    x, y = data
    model = tfguard.guard(Net(), policy="skip", quarantine_dir=str(tmp_path))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    history = model.fit(poisoned(x), y, batch_size=16, shuffle=False, verbose=0)
    assert history.history["guard_skipped"] == [1.0]


def test_every_layer_mode_catches_what_the_output_check_cannot_see(data, tmp_path):
    x, y = data

    def build():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((4,))
        h = keras.layers.Dense(8, name="dense")(inputs)
        # A side branch overflows, then is masked: outputs, loss and gradients stay finite.
        blown = keras.layers.Lambda(lambda t: tf.stop_gradient(t) * 1e38 * 1e38, name="overflow")(h)
        masked = keras.layers.Lambda(
            lambda t: tf.where(tf.math.is_finite(t), t, tf.zeros_like(t)), name="mask"
        )(blown)
        merged = keras.layers.Add(name="merge")([h, masked])
        outputs = keras.layers.Dense(3, activation="softmax", name="out")(merged)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        return model

    quiet = tfguard.guard(build(), policy="raise", forward="output", quarantine_dir=str(tmp_path))
    quiet.fit(x, y, batch_size=64, verbose=0)  # clipped infinities: outputs and loss finite
    loud = tfguard.guard(build(), policy="raise", forward="layers", quarantine_dir=str(tmp_path))
    with pytest.raises(GuardViolation) as info:
        loud.fit(x, y, batch_size=64, verbose=0)
    assert info.value.stage == "forward"
    assert info.value.where == "layer 'overflow'"


def test_every_layer_mode_costs_one_op_per_layer_more_than_the_output_check():
    # A layer's output has an unknown batch size, so it cannot be stacked with others; its finiteness is
    # one Sum. Taken as a stack of one and its slice, it was six ops per layer (the stack, the slice and
    # their constants) on every step.
    def ops(depth, forward):
        model = deep_mlp(depth)
        tfguard.guard(model, policy="skip", forward=forward, quarantine_dir=None)
        spec = (tf.TensorSpec((None, 8), tf.float32), tf.TensorSpec((None,), tf.int64))
        return len(traced_step(model).get_concrete_function(spec).graph.get_operations()), len(model.layers)

    (out4, layers4), (out16, layers16) = ops(4, "output"), ops(16, "output")
    (every4, _), (every16, _) = ops(4, "layers"), ops(16, "layers")
    per_layer = ((every16 - out16) - (every4 - out4)) / (layers16 - layers4)
    assert per_layer <= 1.5


def _mixed_sequential():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu", dtype="mixed_float16"),
                              keras.layers.Dense(3, activation="softmax", dtype="float32")])
    model.compile(optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(1e-2)),
                  loss="sparse_categorical_crossentropy")
    return model


@pytest.mark.parametrize("build", [_mixed_sequential, lambda: foreign.custom_step_mixed()[0]],
                         ids=["sequential", "lazy_subclass_own_step"])
def test_a_mixed_precision_model_is_guarded_without_a_coverage_warning(build, data):
    # Its LossScaleOptimizer's inner update runs inside the loss scale's cond: it is part of the update the
    # guard sees, not one "inside the step's own control flow". A subclass built lazily has an optimizer
    # that is not built when its step is first traced: the interception builds it, as its own apply would, and
    # sees that first update too (it warned "applied no optimizer update that the guard could see").
    x, y = data
    model = build()
    tfguard.guard(model, policy="raise", quarantine_dir=None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert [str(w.message) for w in caught if issubclass(w.category, tfguard.GuardWarning)] == []


def test_none_gradients_are_skipped_not_an_error(data, tmp_path):
    class WithUnused(keras.Model):
        def __init__(self):
            super().__init__()
            self.used = keras.layers.Dense(3, activation="softmax")
            self.unused = keras.layers.Dense(2)

        def build(self, shape):
            self.used.build(shape)
            self.unused.build(shape)

        def call(self, inputs):
            return self.used(inputs)

    x, y = data
    model = WithUnused()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    tfguard.guard(model, policy="raise", quarantine_dir=str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = model.fit(x, y, batch_size=16, verbose=0)
    assert history.history["guard_violations"] == [0.0]


def test_loss_stage_names_the_loss(data, tmp_path):
    x, y = data

    def log_loss(y_true, y_pred):
        return tf.reduce_mean(tf.math.log(y_pred - 1.0))  # log of a negative number

    keras.utils.set_random_seed(0)
    model = small_classifier()
    model.compile(optimizer="adam", loss=log_loss)
    tfguard.guard(model, policy="raise", data=None, localize=False, quarantine_dir=str(tmp_path))
    with pytest.raises(GuardViolation) as info:
        model.fit(x, y, batch_size=64, verbose=0)
    assert info.value.stage == "loss"
    assert "lower the learning rate" not in info.value.hint


def _op_types(model, spec):
    concrete = traced_step(model).get_concrete_function(spec)
    ops = [op.type for op in concrete.graph.get_operations()]
    for function in concrete.graph._functions.values():
        ops += [node.op for node in function.cached_definition.node_def]
    return sorted(ops)


def test_off_means_off_the_traced_step_has_exactly_the_unguarded_ops(monkeypatch, tmp_path):
    spec = (tf.TensorSpec([None, 4], tf.float32), tf.TensorSpec([None], tf.int64))

    def compiled():
        keras.utils.set_random_seed(0)
        model = small_classifier()
        model.build((None, 4))
        model.optimizer.build(model.trainable_variables)
        return model

    plain = _op_types(compiled(), spec)
    off = _op_types(tfguard.guard(compiled(), enabled=False), spec)
    monkeypatch.setenv("TFGUARD", "0")
    env_off = _op_types(tfguard.guard(compiled()), spec)
    monkeypatch.delenv("TFGUARD")
    on = _op_types(tfguard.guard(compiled(), quarantine_dir=str(tmp_path)), spec)
    assert off == plain
    assert env_off == plain
    assert len(on) > len(plain)


def test_an_epoch_with_no_applied_update_reports_nan_not_a_loss_of_zero(classifier, data, tmp_path):
    x, y = data
    model = tfguard.guard(
        classifier, policy="skip", max_consecutive_skips=100, quarantine_dir=str(tmp_path)
    )
    history = model.fit(np.full_like(x, np.nan), y, batch_size=16, epochs=1, verbose=0)
    assert history.history["guard_skipped"] == [4.0]
    assert np.isnan(history.history["loss"][0])
