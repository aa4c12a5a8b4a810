"""The workaround for keras-team/keras#20585: Keras 3.15 cannot `fit` under MultiWorkerMirroredStrategy.

Keras all-reduces the first batch with `strategy.reduce` on an `(x, y)`
tuple and reduces scalar logs along axis 0; both fail in multi-worker mode.
`enable_multi_worker(model)` replaces, on one model only, the two private
Keras methods involved (`_maybe_symbolic_build`, `_make_function`). Delete
this module, and its one call in `tfguard._firewall.instrument`, when Keras
fixes the issue; `tests/distribute/test_multiworker.py` shows whether a
plain `fit` works.

Example:

>>> import keras
>>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> enable_multi_worker(m) is m  # no MWMS here: untouched
True
"""

from __future__ import annotations

import keras
import tensorflow as tf

from tfguard import _seam
from tfguard._errors import ContractError

ENABLED = "_tfguard_multi_worker"
"""The attribute `enable_multi_worker` sets on a model it changed."""


def enabled(model) -> bool:
    """Whether `enable_multi_worker` changed `model` (its train function then pulls batches per worker)."""
    return bool(getattr(model, ENABLED, False))


def _in_multi_worker_mode(strategy) -> bool:
    extended = getattr(strategy, "extended", None)
    check = getattr(extended, "_in_multi_worker_mode", None)
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and bool(
        check and check()
    )


def _first_local_batch(strategy, batch):
    def local(value):
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    return tf.nest.map_structure(local, batch)


def _local_mean(strategy, value):
    """Keras's `reduce_per_replica(..., "mean")` over this worker's replicas only.

    Logs are already global: metric variables are synchronized and the
    firewall's flags and counts are all-reduced inside the step.
    """
    if not isinstance(value, tf.distribute.DistributedValues):
        return value
    parts = strategy.experimental_local_results(value)
    return parts[0] if len(parts) == 1 else tf.reduce_mean(tf.stack(parts), axis=0)


def enable_multi_worker(model: keras.Model) -> keras.Model:
    """Makes Keras 3's `fit` and `evaluate` run under MultiWorkerMirroredStrategy.

    Keras 3.15 cannot `fit` in multi-worker mode (keras-team/keras#20585):
    it all-reduces the first batch with `strategy.reduce` on an `(x, y)`
    tuple ("Attempt to convert a value (PerReplica ...) to a Tensor"), and
    reduces scalar logs with `strategy.reduce("MEAN", v, axis=0)`
    ("Invalid reduction dimension 0 for input with 0 dimensions"). This
    replaces, on this model only, the symbolic build (built from this
    worker's first batch: only shapes and dtypes matter) and the step
    function (logs taken from this worker's replicas: they are already
    global). The update itself is unchanged: gradients are all-reduced by
    the optimizer, and a guarded step all-reduces its flags. A model under
    any other strategy is returned untouched; calling it twice is harmless.

    Example:

    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> enable_multi_worker(m) is m  # no MWMS here: untouched
    True

    Args:
        model: a Keras model created under the strategy's scope.

    Returns:
        The same model.

    Raises:
        ContractError: if `model` is not a Keras model.
    """
    if not isinstance(model, keras.Model):
        raise ContractError(
            f"Received an invalid value for `model`, expected a keras.Model. Received: {type(model).__name__}"
        )
    strategy = model.distribute_strategy
    if not _in_multi_worker_mode(strategy) or enabled(model):
        return model

    def maybe_symbolic_build(iterator=None, data_batch=None):
        if iterator is not None:
            for _, _, batches in iterator:
                data_batch = _first_local_batch(strategy, next(batches))
                break
        with strategy.scope():
            model._symbolic_build(data_batch=data_batch)

    def make_function(step_function):
        @tf.autograph.experimental.do_not_convert
        def one_step_on_data(data):
            outputs = strategy.run(step_function, args=(data,))
            return tf.nest.map_structure(lambda v: _local_mean(strategy, v), outputs)

        if not model.run_eagerly:
            one_step_on_data = tf.function(
                one_step_on_data, reduce_retracing=True, jit_compile=model.jit_compile
            )
        autoconvert = getattr(model, "_autoconvert_optionals", None)
        if autoconvert is not None:
            one_step_on_data = autoconvert(one_step_on_data)

        def function(iterator):
            outputs = None
            for _ in range(max(1, int(model.steps_per_execution))):
                try:
                    data = next(iterator)
                except (StopIteration, tf.errors.OutOfRangeError):
                    break
                outputs = one_step_on_data(data)
            if outputs is None:
                raise StopIteration
            return outputs

        return function

    _seam.replace(model, "_maybe_symbolic_build", maybe_symbolic_build)
    _seam.replace(model, "_make_function", make_function)
    object.__setattr__(model, ENABLED, True)
    model.train_function = None
    model.test_function = None
    return model


__all__ = ["ENABLED", "enable_multi_worker", "enabled"]
