"""Canaries of the private Keras surface the keras#20585 workaround replaces, each naming Keras's version.

`tfguard._distribute.keras_20585` overrides two private `Trainer` methods
on one model and calls two more; these tests check, without a cluster,
that Keras still calls them where the workaround expects (a real
multi-worker `fit` is `tests/distribute/test_multiworker.py`).

They run on requirements.lock's pair in `make test` (TensorFlow 2.21.0 with
Keras 3.15.1) and on each pair of `compat/pairs.py` in `make compat`
(TensorFlow 2.16.2 with Keras 3.7.0, 2.19.1 with 3.10.0); docs/versions.md
lists every pair checked.
"""

import inspect

import keras
import numpy as np
import tensorflow as tf
from tensorflow.python.distribute import (
    collective_all_reduce_strategy,  # MWMS's extended, no cluster made
)

from tests.hooks.surface import canary


def _model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_canary_fit_builds_through_the_instance_maybe_symbolic_build():
    model = _model()
    calls = []
    own = model._maybe_symbolic_build

    def recorded(iterator=None, data_batch=None):
        calls.append((iterator is not None, data_batch is not None))
        return own(iterator=iterator, data_batch=data_batch)

    with canary("Model._maybe_symbolic_build", "keras_20585"):
        assert list(inspect.signature(own).parameters) == ["iterator", "data_batch"]
        object.__setattr__(model, "_maybe_symbolic_build", recorded)
        model.fit(np.ones((4, 2)), np.ones((4, 1)), batch_size=2, epochs=1, verbose=0)
        assert calls, "fit no longer calls the instance's _maybe_symbolic_build"


def test_canary_fit_makes_its_train_function_through_the_instance_make_function():
    model = _model()
    made = []
    own = model._make_function

    def recorded(step_function):
        made.append(step_function)
        return own(step_function)

    with canary("Trainer._make_function", "keras_20585"):
        assert list(inspect.signature(own).parameters) == ["step_function"]
        object.__setattr__(model, "_make_function", recorded)
        model.fit(np.ones((4, 2)), np.ones((4, 1)), batch_size=2, epochs=1, verbose=0)
        assert [getattr(f, "__name__", None) for f in made] == ["train_step"]


def test_canary_symbolic_build_takes_a_local_batch():
    model = _model()
    with canary("Trainer._symbolic_build(data_batch=...)", "keras_20585"):
        model._symbolic_build(data_batch=(tf.ones((2, 2)), tf.ones((2, 1))))
        assert model.optimizer.built


def test_canary_autoconvert_optionals_reads_an_optional_as_none():
    """Keras 3.12 on wraps its step in `_autoconvert_optionals`; older ones (3.7 to 3.11, checked) have none.

    The workaround wraps its own step the same way only where Keras has it
    (feature detection), so a Keras without it must not use it in its own
    `_make_function` either.
    """
    model = _model()
    with canary("Trainer._autoconvert_optionals", "keras_20585"):
        if not hasattr(model, "_autoconvert_optionals"):
            assert "_autoconvert_optionals" not in inspect.getsource(type(model)._make_function)
            return
        step = model._autoconvert_optionals(lambda data: data)
        x, y = step((tf.ones(1), tf.experimental.Optional.empty(None)))
        assert y is None and x.shape == (1,)


def test_canary_in_multi_worker_mode():
    with canary("StrategyExtended._in_multi_worker_mode", "keras_20585"):
        assert tf.distribute.MirroredStrategy(["/cpu:0"]).extended._in_multi_worker_mode() is False
        assert callable(collective_all_reduce_strategy.CollectiveAllReduceExtended._in_multi_worker_mode)
