"""The private Keras surface tfguard still touches, in one place.

Everything else in tfguard uses Keras's public API. What remains here is
small, named, listed in docs/internals.md ("Keras and TensorFlow internals
tfguard still touches") and checked by `tests/hooks/test_keras_surface.py` and
`tests/hooks/test_keras_compat.py`, which fail naming `keras.__version__`
and the attribute when a Keras release changes it;
`tests/test_private_surface.py` fails when a private name is used outside
this module, `tf_compat` (TensorFlow's) and the keras#20585 workaround:

* `call_has_training_arg(model)`: whether `model.call` takes `training`
  (Keras keeps it as `Model._call_has_training_arg`);
* `nested_layers(model)`: every nested layer (`Layer._flatten_layers`);
* `keras_home()`: Keras's cache folder (`keras.src.backend.config.keras_home`);
* `global_seed_generator()`: the seed generator of Keras's random ops called
  without a seed (`keras.src.backend.common.global_state`);
* `build_before_trace(model, data)`: Keras's own `Trainer._symbolic_build`,
  called with a batch in hand so the optimizer's slots and the compiled
  metrics exist before the step is traced (a first trace that creates
  variables is traced twice by `tf.function`); a Keras that no longer has
  it, or whose build leaves them unbuilt, is reported (`KerasSurfaceWarning`);
* `compute_loss(model, ...)`: `Trainer._compute_loss`, the model's
  `compute_loss` called with or without `training` as its signature takes it;
* `optimizer_variables(optimizer)`: the trainable variables an optimizer
  was built for (`BaseOptimizer._trainable_variables`), what `apply`
  updates when it is called without them;
* `loss_function_kwargs(loss)`: the keyword arguments a built-in loss
  class passes to its function (`LossFunctionWrapper._fn_kwargs`:
  `from_logits`, `ignore_class`, ...);
* `keras_history(tensor)`, `producer_inputs(tensor)`,
  `consumers(layer)`, `call_outputs(layer, tensor)`: the functional graph of a model
  (`KerasTensor._keras_history`, `Operation._inbound_nodes`,
  `Operation._outbound_nodes`);
* `build_shapes(model)`: the input shapes a subclassed model was built
  with (`Layer._build_shapes_dict`);
* `sequential_graph(model)`: the functional model a `Sequential` builds
  and runs inside (`Sequential._functional`): a model of its own, with the
  same variables, that is not one the program made;
* `neutral_writes(optimizer, variables)`, `neutral_apply`,
  `clip_gradients`: an optimizer's backend-neutral update
  (`keras.src.optimizers.base_optimizer.BaseOptimizer`: `apply`, `assign`,
  `assign_add`, `assign_sub`, `_apply_weight_decay`; the TensorFlow
  backend's `_distributed_tf_update_step`; `Optimizer._var_key`,
  `Optimizer._clip_gradients`), for `tfguard._hooks.dry_run`;
* `OPTIMIZER_CLASS`: the class whose `apply` every Keras optimizer of the
  TensorFlow backend inherits (the public `keras.optimizers.Optimizer`);
  the interception of the optimizer's apply wraps that one method (`tfguard._hooks.context`).

The workaround for keras-team/keras#20585 (fit under
MultiWorkerMirroredStrategy) lives apart, in `tfguard._distribute.keras_20585`,
so it can be deleted on its own when Keras fixes it.

Example:

>>> import keras
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name="d")])
>>> [layer.name for layer in nested_layers(model)]
['d']
>>> call_has_training_arg(model)
True
"""

from __future__ import annotations

import contextlib
import inspect
import os
import warnings
from pathlib import Path

import keras
import tensorflow as tf
from keras.src.backend import config as keras_config
from keras.src.backend.common import global_state
from keras.src.optimizers.base_optimizer import BaseOptimizer

from tfguard import _seam
from tfguard._versions import KERAS_RANGE, specifier, supported_range

OPTIMIZER_CLASS = keras.optimizers.Optimizer
"""Every TensorFlow-backend Keras optimizer inherits `apply` from here."""


def unpack(data):
    """`(x, y, sample_weight)` of a batch as Keras unpacks it (public API)."""
    return keras.utils.unpack_x_y_sample_weight(data)


def call_has_training_arg(model: keras.layers.Layer) -> bool:
    """Whether the layer's `call` accepts `training` (Keras checks the signature once)."""
    return bool(getattr(model, "_call_has_training_arg", True))


def nested_layers(model: keras.layers.Layer) -> list[keras.layers.Layer]:
    """Every layer nested in `model`, depth first, without `model` itself and input layers."""
    return [layer for layer in model._flatten_layers(include_self=False, recursive=True)
            if not isinstance(layer, keras.layers.InputLayer)]



def global_seed_generator():
    """The `SeedGenerator` Keras's random ops draw from when given no seed, or `None` before the first such draw."""
    return global_state.get_global_attribute("global_seed_generator")


def keras_home(at_import: bool = False) -> Path:
    """The folder Keras caches downloads in (`~/.keras`, or `$KERAS_HOME`).

    Keras reads `KERAS_HOME` once, when it is imported; a value set later
    (a test, a notebook cell) is honoured here unless `at_import=True`,
    which answers where Keras's own loaders look.
    """
    if not at_import and "KERAS_HOME" in os.environ:
        return Path(os.environ["KERAS_HOME"]).expanduser()
    return Path(os.path.expanduser(keras_config.keras_home()))


class KerasSurfaceWarning(UserWarning):
    """A private Keras name tfguard relies on changed: training goes on, the message says what is lost."""


def surface_changed(name: str, lost: str) -> KerasSurfaceWarning:
    """The warning for a private Keras name that is gone or behaves differently.

    Example:

    >>> str(surface_changed("Trainer._symbolic_build", "nothing")).startswith("Keras ")
    True
    """
    return KerasSurfaceWarning(
        f"Keras {keras.__version__} changed `{name}`, which tfguard relies on ({supported_range()}): {lost}. "
        f"Install a Keras of that range (pip install 'keras{specifier(KERAS_RANGE)}') or update "
        "tfguard._hooks.keras_compat; tests/hooks/test_keras_surface.py shows what changed."
    )


_CANNOT_BUILD = (ValueError, TypeError, RuntimeError, NotImplementedError, AttributeError, LookupError,
                 tf.errors.OpError)
"""What Keras's symbolic build raises for a model or batch it cannot build without running it.

A model whose `call` needs real values (`.numpy()`, Python control flow on
a tensor) gives Keras's own `RuntimeError` ("Unable to automatically build
the model"), invalid inputs a `ValueError`, a batch spec without a shape
(an `OptionalSpec` standing for `None`) an `AttributeError`, an op that
rejects a symbolic shape a `tf.errors.OpError`. Anything else propagates.
"""

_DOUBLE_TRACE = "the guarded step is traced twice again (its first trace creates the optimizer's variables)"


def build_before_trace(model: keras.Model, data) -> bool:
    """Builds the optimizer, compiled loss and metrics outside any trace; whether it did.

    Only for a built model that runs Keras's own `train_step` (what Keras
    itself does before tracing under a distribution strategy); a model with
    its own step, or one Keras cannot build symbolically (`_CANNOT_BUILD`),
    is left to build in its first trace, as without tfguard. A Keras whose
    `Trainer._symbolic_build` is gone, takes no `data_batch`, or leaves the
    optimizer unbuilt warns (`KerasSurfaceWarning`): the double trace would
    otherwise come back unnoticed.
    """
    if type(model).train_step is not keras.Model.train_step or not model.built:
        return False
    build = getattr(model, "_symbolic_build", None)
    if build is None or "data_batch" not in inspect.signature(build).parameters:
        warnings.warn(surface_changed("Trainer._symbolic_build(data_batch=...)", _DOUBLE_TRACE), stacklevel=2)
        return False
    try:
        build(data_batch=data)
    except _CANNOT_BUILD:  # the first trace builds them then, as it would without tfguard
        return False
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:
        warnings.warn(surface_changed("Trainer._symbolic_build", "it no longer builds the optimizer: " + _DOUBLE_TRACE),
                      stacklevel=2)
        return False
    return True


def compute_loss(model: keras.Model, x, y, y_pred, sample_weight=None, training: bool = True):
    """`model.compute_loss(...)`, passing `training` only when the override takes it (`Trainer._compute_loss`)."""
    return model._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training)


def optimizer_variables(optimizer) -> list:
    """The trainable variables `optimizer` was built for: what `apply(grads)` updates when given no variables."""
    return list(optimizer._trainable_variables)



def loss_function_kwargs(loss) -> dict:
    """The keyword arguments a built-in loss class passes to its function (`{}` for anything else).

    Example:

    >>> loss_function_kwargs(keras.losses.SparseCategoricalCrossentropy(from_logits=True))["from_logits"]
    True
    """
    return dict(getattr(loss, "_fn_kwargs", None) or {})


def keras_history(tensor):
    """`(operation, node_index, tensor_index)` of a functional model's symbolic tensor, or `None`."""
    return getattr(tensor, "_keras_history", None)


def producer_inputs(tensor) -> list:
    """The input tensors of the call that produced a symbolic `tensor` (`[]` when it has no history)."""
    history = keras_history(tensor)
    if history is None or history.operation is None:
        return []
    return list(history.operation._inbound_nodes[history.node_index].input_tensors)


def call_outputs(layer, tensor) -> list:
    """The symbolic tensors `layer`'s call on `tensor` returned in a functional graph (`Operation._inbound_nodes`)."""
    found = []
    for node in getattr(layer, "_inbound_nodes", None) or []:
        inputs = keras.tree.flatten(getattr(node, "input_tensors", None) or [])
        if any(t is tensor for t in inputs):
            found.extend(t for t in keras.tree.flatten(getattr(node, "output_tensors", None) or [])
                         if t is not None)
    return found


def consumers(layer) -> list:
    """The operations (layers, models) that take `layer`'s outputs in the functional graphs it was called in."""
    return [node.operation for node in getattr(layer, "_outbound_nodes", [])]


def sequential_graph(model) -> keras.Model | None:
    """The functional model a built `Sequential` runs inside (`Sequential._functional`), else `None`."""
    if not isinstance(model, keras.Sequential):
        return None
    return getattr(model, "_functional", None)


def build_shapes(model) -> dict | None:
    """The input shapes a layer was built with, by `build` argument name, or `None` (never built that way)."""
    return getattr(model, "_build_shapes_dict", None)


NEUTRAL_WRITES = ("assign", "assign_add", "assign_sub", "_apply_weight_decay")
"""The optimizer methods whose backend-neutral versions (`BaseOptimizer`'s) write through a `StatelessScope`."""

_BACKEND_OPTIMIZER = next(cls for cls in OPTIMIZER_CLASS.__mro__ if "_distributed_tf_update_step" in vars(cls))
"""The TensorFlow backend's optimizer class: its writes go to `tf.Variable`s directly."""


def _from_backend(optimizer, name: str) -> bool:
    """Whether `optimizer` takes method `name` from the TensorFlow backend's class (no class of its own overrides it).

    Nadam's `_backend_update_step` (it advances `_u_product` first) and
    Muon's `_apply_weight_decay` are their own, and stay.
    """
    owner = next(cls for cls in type(optimizer).__mro__ if name in vars(cls))
    return owner is _BACKEND_OPTIMIZER


@contextlib.contextmanager
def neutral_writes(optimizer, variables):
    """The optimizer's backend-neutral writes and its own variable keys, on this instance only.

    The TensorFlow backend's `assign`, `_apply_weight_decay` and per-variable
    loop (`_distributed_tf_update_step`, which its `_backend_update_step`
    ends in) write `tf.Variable`s directly and would escape a
    `StatelessScope`; `BaseOptimizer`'s route every write through
    `Variable.assign`, which the scope captures, and the loop here calls
    `update_step` on the Keras variables the step was given. A method the
    optimizer's own class overrides runs as it is (Nadam's
    `_backend_update_step` advances `_u_product`, then reaches the loop).
    """
    keys = {id(v): optimizer._var_key(v) for v in [*variables, *optimizer.variables]}
    own_key = type(optimizer)._var_key
    given: list = []  # the Keras variables of the `_backend_update_step` under way, in its order

    def update_step_given(grads, trainable_variables, learning_rate):
        given[:] = trainable_variables
        type(optimizer)._backend_update_step(optimizer, grads, trainable_variables, learning_rate)

    def update_each(distribution, grads_and_vars, learning_rate):
        # The backend's `_backend_update_step` hands on its variables' `.value`s (a StatelessScope's
        # tensors once written there), in the order it was given them.
        for (grad, _), variable in zip(grads_and_vars, given, strict=True):
            optimizer.update_step(grad, variable, learning_rate)

    replaced = {name: getattr(BaseOptimizer, name).__get__(optimizer)
                for name in NEUTRAL_WRITES if _from_backend(optimizer, name)}
    replaced["_backend_update_step"] = update_step_given
    replaced["_distributed_tf_update_step"] = update_each
    # Inside a StatelessScope a variable assigned once reads back as a tensor, which the
    # backend's key function cannot name: keys are taken before, by identity.
    replaced["_var_key"] = lambda v: keys[id(v)] if id(v) in keys else own_key(optimizer, v)
    for name, method in replaced.items():
        _seam.replace(optimizer, name, method)
    try:
        yield
    finally:
        for name, method in replaced.items():
            _seam.restore(optimizer, name, method)


def neutral_apply(optimizer, grads: list, variables: list) -> None:
    """`BaseOptimizer.apply`: the backend-neutral update (under `neutral_writes`, captured by a `StatelessScope`)."""
    BaseOptimizer.apply(optimizer, grads, variables)


def clip_gradients(optimizer, grads: list) -> list:
    """`grads` clipped as the optimizer's `clipnorm` / `clipvalue` / `global_clipnorm` say."""
    return optimizer._clip_gradients(grads)


def build_optimizer(optimizer, variables) -> None:
    """Builds `optimizer` on `variables` as its own `apply` would: under its name scope, then marked built.

    Built so, a `LossScaleOptimizer`'s inner slots are named as Keras names
    them (`loss_scale_optimizer/adam/dense_kernel_momentum`, not
    `adam/dense_kernel_momentum`).

    Example:

    >>> import keras
    >>> dense = keras.layers.Dense(1)
    >>> dense.build((None, 2))
    >>> optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(momentum=0.9), name="scaled")
    >>> build_optimizer(optimizer, dense.trainable_variables)
    >>> optimizer.built, optimizer.variables[-1].path.startswith("scaled/")
    (True, True)
    """
    with keras.name_scope(optimizer.name, caller=optimizer):
        optimizer.build(variables)
    optimizer.built = True


def optimizers_of(model: keras.Model) -> list:
    """The optimizers a model holds: `model.optimizer` and any optimizer attribute (GANs).

    A `LossScaleOptimizer` comes with its inner optimizer.
    """
    found: list = []

    def add(candidate):
        if isinstance(candidate, keras.optimizers.Optimizer) and all(candidate is not f for f in found):
            found.append(candidate)
            inner = getattr(candidate, "inner_optimizer", None)
            if inner is not None:
                add(inner)

    add(getattr(model, "optimizer", None))
    for value in list(vars(model).values()):
        add(value)
    return found


__all__ = ["NEUTRAL_WRITES", "OPTIMIZER_CLASS", "KerasSurfaceWarning", "build_before_trace", "build_optimizer", "build_shapes",
           "call_has_training_arg", "call_outputs", "clip_gradients", "compute_loss", "consumers", "global_seed_generator",
           "keras_history", "keras_home",
           "loss_function_kwargs", "nested_layers", "neutral_apply",
           "neutral_writes", "optimizer_variables", "optimizers_of", "producer_inputs", "sequential_graph", "surface_changed", "unpack"]
