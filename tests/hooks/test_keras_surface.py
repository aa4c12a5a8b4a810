"""Canaries of the private Keras surface: one per row of docs/internals.md's table, each naming Keras's version.

Each test checks what `tfguard._hooks.keras_compat` (or the Keras method
tfguard wraps) gives on real Keras objects; a Keras release that renames
or changes the private name fails here with `keras.__version__` and the
name (`tests/hooks/surface.py`), before it fails somewhere downstream.

They run on every pair tfguard checks: requirements.lock's in `make test`
(TensorFlow 2.21.0 with Keras 3.15.1) and each pair of `compat/pairs.py`
in `make compat` (TensorFlow 2.16.2 with Keras 3.7.0, 2.19.1 with 3.10.0),
each run's header naming its pair; docs/versions.md lists the pairs
checked by hand too. A canary that accepts two behaviours names the
Keras versions of each.
"""

import inspect
import os
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.hooks.surface import canary, changed
from tfguard._hooks import dry_run, keras_compat


def _dense(compiled=True, **compile_args):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="d")])
    if compiled:
        model.compile(**{"optimizer": "adam", "loss": "mse", "metrics": ["mae"], **compile_args})
    return model


def test_a_canary_names_the_version_and_the_attribute():
    with pytest.raises(pytest.fail.Exception) as failed, canary("Layer._made_up"):
        raise AttributeError("no attribute '_made_up'")
    assert f"Keras {keras.__version__} changed `Layer._made_up`" in str(failed.value)
    assert f"TensorFlow {tf.__version__}" in changed("X", "tensorflow", KeyError("x"))


def test_canary_call_has_training_arg():
    class NoTraining(keras.Model):
        def call(self, inputs):
            return inputs

    class WithTraining(keras.Model):
        def call(self, inputs, training=False):
            return inputs

    with canary("Model._call_has_training_arg"):
        assert "_call_has_training_arg" in vars(WithTraining())
        assert keras_compat.call_has_training_arg(WithTraining()) is True
        assert keras_compat.call_has_training_arg(NoTraining()) is False


def test_canary_flatten_layers():
    inner = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2, name="inner_dense")], name="inner")
    outer = keras.Sequential([keras.Input((2,)), inner, keras.layers.Dense(1, name="top")])
    with canary("Layer._flatten_layers"):
        assert [layer.name for layer in keras_compat.nested_layers(outer)] == ["inner", "inner_dense", "top"]


def test_canary_keras_home(monkeypatch):
    with canary("keras.src.backend.config.keras_home"):
        at_import = keras_compat.keras_home(at_import=True)
        assert at_import.is_absolute() and (at_import.name == ".keras" or "KERAS_HOME" in os.environ)
        monkeypatch.setenv("KERAS_HOME", "/tmp/elsewhere")
        assert keras_compat.keras_home() == Path("/tmp/elsewhere")


def test_canary_global_seed_generator():
    with canary("keras.src.backend.common.global_state (global_seed_generator)"):
        keras.random.uniform(())  # a draw without a seed makes it
        seeds = keras_compat.global_seed_generator()
        before = keras.ops.convert_to_numpy(seeds.state).copy()
        keras.random.uniform(())
        assert not np.array_equal(before, keras.ops.convert_to_numpy(seeds.state)), "its state did not move"


def test_canary_symbolic_build_builds_everything_so_the_step_traces_once():
    calls = []

    def counted_mse(y_true, y_pred):
        calls.append(1)  # Python runs once per trace
        return keras.ops.mean(keras.ops.square(y_true - y_pred), axis=-1)

    model = _dense(loss=counted_mse)
    x, y = tf.ones((4, 3)), tf.ones((4, 2))
    with canary("Trainer._symbolic_build(data_batch=...)"), warnings.catch_warnings():
        warnings.simplefilter("error", keras_compat.KerasSurfaceWarning)
        assert keras_compat.build_before_trace(model, (tf.TensorSpec([None, 3]), tf.TensorSpec([None, 2])))
        assert model.optimizer.built and model.optimizer.variables
        before = len(calls)
        tf.function(model.train_step)((x, y))
        assert len(calls) - before == 1, f"the step was traced {len(calls) - before} times"


def test_a_model_keras_cannot_build_symbolically_is_left_to_its_first_trace():
    class NeedsValues(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)

        def call(self, x):
            float(tf.reduce_sum(x).numpy())  # no value in a symbolic build
            return self.dense(x)

    model = NeedsValues()
    model(np.ones((1, 2), "float32"))
    model.compile(optimizer="sgd", loss="mse")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert keras_compat.build_before_trace(model, (tf.TensorSpec([None, 2]), tf.TensorSpec([None, 1]))) is False
    assert not model.optimizer.built


def test_a_symbolic_build_that_changed_its_signature_warns_naming_keras_version():
    model = _dense()
    model._symbolic_build = lambda iterator=None: None  # as if Keras renamed `data_batch`
    with pytest.warns(keras_compat.KerasSurfaceWarning, match=f"Keras {keras.__version__} changed `Trainer._symbolic_build"):
        assert keras_compat.build_before_trace(model, (tf.ones((1, 3)), tf.ones((1, 2)))) is False


def test_a_symbolic_build_that_leaves_the_optimizer_unbuilt_warns():
    model = _dense()
    model._symbolic_build = lambda iterator=None, data_batch=None: None  # as if Keras stopped building it
    with pytest.warns(keras_compat.KerasSurfaceWarning, match="no longer builds the optimizer"):
        assert keras_compat.build_before_trace(model, (tf.ones((1, 3)), tf.ones((1, 2)))) is False


def test_canary_compute_loss():
    class OldStyle(keras.Sequential):
        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):  # no `training` (Keras < 3.3)
            return keras.ops.sum(y_pred) * 0.0 + 7.0

    y, y_pred = np.ones((2, 2), "float32"), np.zeros((2, 2), "float32")
    old = OldStyle([keras.Input((3,)), keras.layers.Dense(2)])
    old.compile(optimizer="sgd", loss="mse")
    with canary("Trainer._compute_loss"):
        assert float(keras_compat.compute_loss(_dense(), None, y, y_pred)) == pytest.approx(1.0)
        assert float(keras_compat.compute_loss(old, None, y, y_pred, training=False)) == pytest.approx(7.0)


def test_canary_optimizer_trainable_variables():
    w = keras.Variable([1.0, 2.0], name="w")
    optimizer = keras.optimizers.SGD(learning_rate=1.0)
    optimizer.build([w])
    with canary("BaseOptimizer._trainable_variables"):
        assert [v is w for v in keras_compat.optimizer_variables(optimizer)] == [True]
        optimizer.apply([tf.constant([1.0, 1.0])])  # no variables: the ones it was built for
        assert w.numpy().tolist() == [0.0, 1.0]


def test_canary_loss_function_kwargs():
    with canary("LossFunctionWrapper._fn_kwargs"):
        kwargs = keras_compat.loss_function_kwargs(
            keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
        assert kwargs["from_logits"] is True and kwargs["ignore_class"] == 0
        assert keras_compat.loss_function_kwargs(keras.losses.BinaryCrossentropy())["from_logits"] is False
        assert keras_compat.loss_function_kwargs("mse") == {}


def _functional():
    inputs = keras.Input((3,))
    first = keras.layers.Dense(4, name="first")
    drop = keras.layers.Dropout(0.1, name="drop")
    last = keras.layers.Dense(2, name="last")
    return keras.Model(inputs, last(drop(first(inputs)))), first, drop, last


def test_canary_keras_history():
    model, _, _, last = _functional()
    with canary("KerasTensor._keras_history"):
        history = keras_compat.keras_history(model.outputs[0])
        assert history.operation is last and history.node_index == 0 and history.tensor_index == 0
        assert keras_compat.keras_history(tf.ones(2)) is None


def test_canary_inbound_nodes():
    model, first, drop, _ = _functional()
    with canary("Operation._inbound_nodes"):
        (into_last,) = keras_compat.producer_inputs(model.outputs[0])
        assert keras_compat.keras_history(into_last).operation is drop
        (into_drop,) = keras_compat.producer_inputs(into_last)
        assert keras_compat.keras_history(into_drop).operation is first
        assert keras_compat.call_outputs(drop, into_drop) == [into_last]


def test_canary_outbound_nodes():
    _, first, drop, last = _functional()
    with canary("Operation._outbound_nodes"):
        assert keras_compat.consumers(first) == [drop]
        assert keras_compat.consumers(drop) == [last]
        assert keras_compat.consumers(last) == []


def test_canary_sequential_functional():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with canary("Sequential._functional"):
        inner = keras_compat.sequential_graph(model)
        assert isinstance(inner, keras.Model) and not isinstance(inner, keras.Sequential)
        assert [id(v) for v in inner.trainable_variables] == [id(v) for v in model.trainable_variables]
    assert keras_compat.sequential_graph(inner) is None


def test_canary_build_shapes_dict():
    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)

        def call(self, x):
            return self.dense(x)

    model = Subclassed()
    model(np.ones((2, 5), "float32"))
    with canary("Layer._build_shapes_dict"):
        assert [tuple(shape) for shape in keras_compat.build_shapes(model).values()] == [(2, 5)]
        assert keras_compat.build_shapes(Subclassed()) is None


def _built_adam():
    w = keras.Variable([1.0, -2.0], name="w")
    optimizer = keras.optimizers.Adam(learning_rate=0.1)
    optimizer.build([w])
    return w, optimizer


def test_canary_base_optimizer_neutral_writes_stay_in_a_stateless_scope():
    w, optimizer = _built_adam()
    with canary("keras.src.optimizers.base_optimizer.BaseOptimizer (apply, assign*, _apply_weight_decay) and "
                "the TensorFlow backend's _distributed_tf_update_step"):
        assert all(callable(getattr(keras_compat.BaseOptimizer, name)) for name in keras_compat.NEUTRAL_WRITES)
        with keras_compat.neutral_writes(optimizer, [w]), keras.StatelessScope() as scope:
            keras_compat.neutral_apply(optimizer, [tf.constant([1.0, 1.0])], [w])
        assert w.numpy().tolist() == [1.0, -2.0], "the neutral apply wrote the variable"
        assert scope.get_current_value(w) is not None and scope.get_current_value(optimizer.iterations) is not None
        kept = {*keras_compat.NEUTRAL_WRITES, "_backend_update_step", "_distributed_tf_update_step", "_var_key"} & set(vars(optimizer))
        assert not kept, "the instance kept the neutral methods"


def test_canary_var_key_finds_the_slots_of_a_variable():
    w, optimizer = _built_adam()
    real_w, real = _built_adam()
    grad = tf.constant([0.5, -1.0])
    with canary("Optimizer._var_key"):
        values = {v.name: value for v, value in dry_run.dry_run(optimizer, [grad], [w])}
        real.apply([grad], [real_w])
        real_values = {v.name: v.numpy() for v in [real_w, *real.variables]}
        assert len(values) == 4  # the weight, its two moments, iterations
        for name, value in values.items():
            assert np.array_equal(np.asarray(value), real_values[name]), name


def test_canary_clip_gradients():
    optimizer = keras.optimizers.SGD(global_clipnorm=1.0)
    with canary("Optimizer._clip_gradients"):
        clipped = keras_compat.clip_gradients(optimizer, [tf.constant([3.0, 4.0]), tf.constant([0.0])])
        assert float(tf.linalg.global_norm(clipped)) == pytest.approx(1.0)


def test_canary_every_optimizer_applies_through_the_wrapped_class():
    with canary("Optimizer.apply (wrapped at class level), Model.compute_loss, make_train_function"):
        for cls in (keras.optimizers.SGD, keras.optimizers.Adam, keras.optimizers.AdamW,
                    keras.optimizers.RMSprop, keras.optimizers.Adagrad, keras.optimizers.Nadam):
            assert cls.apply is keras_compat.OPTIMIZER_CLASS.apply, cls
        assert list(inspect.signature(keras_compat.OPTIMIZER_CLASS.apply).parameters)[:3] == [
            "self", "grads", "trainable_variables"]
        model = _dense()
        assert "compute_loss" in dir(model) and model.train_function is None
        model.make_train_function()
        assert callable(model.train_function)
