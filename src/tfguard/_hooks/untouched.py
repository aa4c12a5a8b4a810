"""tfguard's own calls of a user's model leave the model as Keras sees it, or are not made.

The invariant checks and lint call the user's model to look at it (a
forward pass in inference mode). A call can change what Keras and the
program see: it builds a layer that was not built (the model then counts
as built, and a save that fails without tfguard succeeds: the keras-io
diffusion example, whose model `fit` never builds), moves the statistics of
a BatchNormalization that hard-codes `training=True`, advances a Dropout's
seed state or a metric's totals, and draws from the global random streams.

`untouched(model)` and `call(model, x)` are the one way tfguard calls a
user's model for itself:

* a model with a nested layer that is not built is not called
  (`UnbuiltModel`): building it could not be undone;
* a model that is not built itself while its layers are (a custom
  `train_step` that calls its sub-networks, never `self(...)`: keras-io's
  siamese network, its diffusion model) is called through its `call`,
  which builds nothing, not through Keras's `__call__`, which would mark
  it built; a model without `call` raises Keras's `NotImplementedError`;
* on exit every non-trainable variable (statistics, seed states), every
  metric variable, and the global random streams (Python's `random`,
  NumPy's, Keras's global seed generator) are put back as they were.

The trainable weights are not copied (a copy of a large model's weights
for each look would double its memory): no inference pass writes them.

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.layers.Dense(2, name="d")], name="s")  # no input shape: not built
>>> with untouched(model):
...     _ = call(model, np.ones((1, 3), "float32"))
Traceback (most recent call last):
...
tfguard._hooks.untouched.UnbuiltModel: tfguard does not call model 's': its layer 'd' is not built, and the call would build it (the program would then see it built)
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import keras
import numpy as np
import tensorflow as tf

from tfguard._hooks import keras_compat


class UnbuiltModel(NotImplementedError):
    """A model tfguard would have to build to look at it: it is left alone."""


def _kept_variables(model) -> list:
    """The variables an inference pass may write, each once, as the variables this process holds.

    Non-trainable variables and metric states; under a `tf.distribute`
    strategy each local copy of a distributed one: reading a metric's
    distributed variable would all-reduce it across the workers, a
    collective the other workers do not run.
    """
    found, seen = [], set()
    for variable in [*model.non_trainable_variables,
                     *(v for metric in getattr(model, "metrics", []) or [] for v in metric.variables)]:
        if id(variable) not in seen:
            seen.add(id(variable))
            found.extend(_local_copies(variable))
    seeds = keras_compat.global_seed_generator()
    if seeds is not None:
        found.extend(_local_copies(seeds.state))
    return found


def _local_copies(variable) -> list:
    """The TensorFlow variables behind `variable` in this process: itself, or a distributed one's local copies."""
    tf_variable = variable.value if isinstance(variable, keras.Variable) else variable
    if isinstance(tf_variable, tf.distribute.DistributedValues):
        return list(tf_variable.distribute_strategy.experimental_local_results(tf_variable))
    return [tf_variable]


@contextlib.contextmanager
def untouched(model: keras.Model) -> Iterator[None]:
    """Calls of `model` inside (with `call`) leave it, and the random streams, as they were.

    Raises:
        UnbuiltModel: one of the model's layers is not built.
    """
    unbuilt = next((layer for layer in keras_compat.nested_layers(model) if not layer.built), None)
    if unbuilt is not None:
        raise UnbuiltModel(f"tfguard does not call model '{model.name}': its layer '{unbuilt.name}' is not "
                           "built, and the call would build it (the program would then see it built)")
    variables = _kept_variables(model)
    values = [v.numpy() for v in variables]
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        for variable, value in zip(variables, values):
            variable.assign(value)
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def call(model: keras.Model, x, **kwargs):
    """`model(x, **kwargs)`, or `model.call(x, **kwargs)` for a model that is not built (which builds nothing).

    For use inside `untouched(model)`.

    Raises:
        NotImplementedError: the model is not built and has no `call` of its own.
    """
    if model.built:
        return model(x, **kwargs)
    return model.call(keras.tree.map_structure(keras.ops.convert_to_tensor, x), **kwargs)


def call_for_inference(model: keras.Model, x):
    """`call(model, x)` in inference mode: `training=False` where the model's `call` takes it.

    For use inside `untouched(model)`.
    """
    kwargs = {"training": False} if keras_compat.call_has_training_arg(model) else {}
    return call(model, x, **kwargs)


__all__ = ["UnbuiltModel", "call", "call_for_inference", "untouched"]
