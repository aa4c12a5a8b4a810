"""The tf.debugging patterns people write by hand, each beside tfguard's answer.

Each test runs both versions on the same bad input and asserts what each
does: both detect it, or the hand-written one silently does not (XLA drops
its asserts; its switch leaves ops behind), while tfguard's does and leaves
the model as it was.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfguard
from tests.conftest import traced_step
from tfguard import GuardViolation, checks


# -- 1. a safe divide guarded by control_dependencies on assert_greater(|b|, 0) -----------
class HandCheckedDivide(keras.layers.Layer):
    def call(self, inputs):
        a, b = inputs[:, :1], inputs[:, 1:2]
        positive = tf.debugging.assert_greater(tf.abs(b), 0.0, message="division by zero")
        with tf.control_dependencies([positive]):
            return a / b


class PlainDivide(keras.layers.Layer):
    def call(self, inputs):
        return inputs[:, :1] / inputs[:, 1:2]


def _divide_model(layer, jit_compile=False):
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1, name="out")(layer(inputs)))
    model.compile(optimizer="sgd", loss="mse", jit_compile=jit_compile)
    return model


def _divide_data():
    x = np.ones((16, 2), np.float32)
    x[3, 1] = 0.0
    return x, np.zeros((16, 1), np.float32)


def test_safe_divide_hand_written_vs_tfguard(tmp_path):
    x, y = _divide_data()
    with pytest.raises(tf.errors.InvalidArgumentError, match="division by zero"):
        _divide_model(HandCheckedDivide(name="ratio")).fit(x, y, verbose=0)
    guarded = tfguard.guard(_divide_model(PlainDivide(name="ratio")), quarantine_dir=str(tmp_path))
    with pytest.raises(GuardViolation, match="First non-finite layer on replay: 'ratio'") as info:
        guarded.fit(x, y, verbose=0)
    assert "RealDiv" in str(info.value)


def test_safe_divide_assert_vanishes_under_xla_but_tfguard_still_stops_it(tmp_path):
    x, y = _divide_data()
    hand = _divide_model(HandCheckedDivide(name="ratio"), jit_compile=True)
    hand.fit(x, y, verbose=0)  # no error: XLA compiled the assert away
    assert not all(np.isfinite(v.numpy()).all() for v in hand.weights)  # poisoned weights
    guarded = tfguard.guard(
        _divide_model(PlainDivide(name="ratio"), jit_compile=True), quarantine_dir=str(tmp_path)
    )
    with pytest.raises(GuardViolation):
        guarded.fit(x, y, verbose=0)
    assert all(np.isfinite(v.numpy()).all() for v in guarded.weights)


# -- 2. seed 000: a custom train step asserting the loss and every gradient finite -------------
class HandCheckedModel(keras.Model):
    """The hand-written pattern: asserts before apply_gradients."""

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred)
        tf.debugging.assert_all_finite(loss, "loss is not finite")
        grads = tape.gradient(loss, self.trainable_variables)
        checked = []
        for grad, var in zip(grads, self.trainable_variables):
            if grad is not None:
                grad = tf.debugging.assert_all_finite(grad, f"gradient of {var.path}")
            checked.append(grad)
        self.optimizer.apply_gradients(zip(checked, self.trainable_variables))
        return self.compute_metrics(x, y, y_pred)


class OwnStepModel(keras.Model):
    """The same step with the asserts taken out: tfguard.guard(model) does their job."""

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return self.compute_metrics(x, y, y_pred)


def _net(cls, jit_compile=False):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    outputs = keras.layers.Dense(3, activation="softmax")(keras.layers.Dense(8)(inputs))
    model = cls(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", jit_compile=jit_compile)
    return model


def _inf_batch():
    x = np.random.default_rng(0).random((32, 4), dtype=np.float32)
    x[18, 2] = np.inf  # batch 1 of 16
    return x, np.arange(32) % 3


def test_custom_train_step_asserts_vs_tfguard(tmp_path):
    x, y = _inf_batch()
    with pytest.raises(tf.errors.InvalidArgumentError, match="is not finite|gradient of"):
        _net(HandCheckedModel).fit(x, y, batch_size=16, shuffle=False, verbose=0)
    model = tfguard.guard(_net(OwnStepModel), quarantine_dir=str(tmp_path))  # the model's own step runs
    model.fit(x[:16], y[:16], batch_size=16, verbose=0)  # batch 0
    with pytest.raises(GuardViolation) as info:
        model.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    assert info.value.stage == "data" and info.value.batch == 2 and info.value.epoch == 0
    assert all(np.isfinite(v.numpy()).all() for v in model.weights)


def test_custom_train_step_asserts_vanish_under_xla_but_tfguard_still_stops_it(tmp_path):
    x, y = _inf_batch()
    hand = _net(HandCheckedModel, jit_compile=True)
    hand.fit(x, y, batch_size=16, shuffle=False, verbose=0)  # no error: XLA compiled the asserts away
    assert not all(np.isfinite(v.numpy()).all() for v in hand.weights)  # poisoned weights
    model = tfguard.guard(_net(OwnStepModel, jit_compile=True), policy="skip", quarantine_dir=None)
    history = model.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    assert history.history["guard_skipped"] == [1.0]
    assert all(np.isfinite(v.numpy()).all() for v in model.weights)


# -- 3. attention: query, key, value of rank 3; query and key of equal length --------------
def hand_checked_attention(query, key, value):
    tf.debugging.assert_rank(query, 3, message="query must be rank 3")
    tf.debugging.assert_rank(key, 3, message="key must be rank 3")
    tf.debugging.assert_rank(value, 3, message="value must be rank 3")
    tf.debugging.assert_equal(tf.shape(query)[1], tf.shape(key)[1], message="lengths differ")
    return keras.ops.softmax(query @ tf.transpose(key, [0, 2, 1])) @ value


ATTENTION = checks.shapes({"query": ("B", "T", None), "key": ("B", "T", None), "value": (None,) * 3})


def tfguard_attention(query, key, value):
    ATTENTION.check({"query": query, "key": key, "value": value})
    return keras.ops.softmax(query @ tf.transpose(key, [0, 2, 1])) @ value


def test_attention_shape_asserts_vs_tfguard():
    q, v = tf.zeros([2, 5, 4]), tf.zeros([2, 5, 4])
    short_key = tf.zeros([2, 3, 4])
    hand_checked_attention(q, q, v)
    tfguard_attention(q, q, v)
    with pytest.raises(tf.errors.InvalidArgumentError, match="lengths differ"):
        hand_checked_attention(q, short_key, v)
    with pytest.raises(GuardViolation, match=r"expected shape \(B, T, None\), received \(2, 3, 4\)"):
        tfguard_attention(q, short_key, v)
    with pytest.raises(GuardViolation, match="received \\(2, 5\\)"):
        tfguard_attention(q, q, tf.zeros([2, 5]))


# -- 4. a DEBUG flag that turns the asserts into tf.no_op() ---------------------------------
DEBUG = False


class HandDebugDense(keras.layers.Dense):
    def call(self, inputs):
        check = tf.debugging.assert_all_finite(inputs, "bad input") if DEBUG else tf.no_op()
        with tf.control_dependencies([check]):
            return super().call(inputs)


def _op_types(model):
    spec = (tf.TensorSpec([None, 4]), tf.TensorSpec([None], tf.int64))
    graph = traced_step(model).get_concrete_function(spec).graph
    return sorted(op.type for op in graph.get_operations())


def _debug_net(dense_cls):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), dense_cls(3, activation="softmax")])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.optimizer.build(model.trainable_variables)
    return model


def test_debug_flag_off_costs_nothing_with_tfguard_but_not_by_hand():
    plain = _op_types(_debug_net(keras.layers.Dense))
    hand_off = _op_types(_debug_net(HandDebugDense))
    tfguard_off = _op_types(tfguard.guard(_debug_net(keras.layers.Dense), enabled=DEBUG))
    assert tfguard_off == plain
    assert hand_off != plain  # the hand-written switch still leaves NoOps and control edges
    assert hand_off.count("NoOp") > plain.count("NoOp")
