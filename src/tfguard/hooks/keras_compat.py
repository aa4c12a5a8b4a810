"""The private Keras surface tfguard still touches, in one place.

Everything else in tfguard uses Keras's public API. What remains here is
small, named, and checked by `tests/hooks/test_keras_compat.py`, which
fails loudly when a Keras release changes it (the README's compatibility
note lists the same items):

* `call_has_training_arg(model)`: whether `model.call` takes `training`
  (Keras keeps it as `Model._call_has_training_arg`);
* `nested_layers(model)`: every nested layer (`Layer._flatten_layers`);
* `loss_tracker(model)`: the compiled `loss` metric (`Trainer._loss_tracker`),
  only to name it in reports;
* `keras_home()`: Keras's cache folder (`keras.src.backend.config.keras_home`);
* `build_before_trace(model, data)`: Keras's own `Trainer._symbolic_build`,
  called with a batch in hand so the optimizer's slots and the compiled
  metrics exist before the step is traced (a first trace that creates
  variables is traced twice by `tf.function`);
* `OPTIMIZER_CLASS`: the class whose `apply` every Keras optimizer of the
  TensorFlow backend inherits (the public `keras.optimizers.Optimizer`);
  the firewall wraps that one method (`tfguard.firewall.context`).

The workaround for keras-team/keras#20585 (fit under
MultiWorkerMirroredStrategy) lives apart, in `tfguard.distribute.keras_20585`,
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

import os
from pathlib import Path

import keras
from keras.src.backend import config as keras_config

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


def loss_tracker(model: keras.Model):
    """The compiled model's `loss` mean metric, or `None` (a custom `compile`)."""
    return getattr(model, "_loss_tracker", None)


def keras_home(at_import: bool = False) -> Path:
    """The folder Keras caches downloads in (`~/.keras`, or `$KERAS_HOME`).

    Keras reads `KERAS_HOME` once, when it is imported; a value set later
    (a test, a notebook cell) is honoured here unless `at_import=True`,
    which answers where Keras's own loaders look.
    """
    if not at_import and "KERAS_HOME" in os.environ:
        return Path(os.environ["KERAS_HOME"]).expanduser()
    return Path(os.path.expanduser(keras_config.keras_home()))


def build_before_trace(model: keras.Model, data) -> bool:
    """Builds the optimizer, compiled loss and metrics outside any trace; whether it did.

    Only for a built model that runs Keras's own `train_step` (what Keras
    itself does before tracing under a distribution strategy); a model with
    its own step, or one Keras cannot build, is left to build in its first
    trace, as without tfguard.
    """
    if type(model).train_step is not keras.Model.train_step or not model.built:
        return False
    build = getattr(model, "_symbolic_build", None)
    if build is None:
        return False
    try:
        build(data_batch=data)
    except Exception:  # noqa: BLE001 - the first trace builds them then, as it would without tfguard
        return False
    return True


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


__all__ = ["OPTIMIZER_CLASS", "build_before_trace", "call_has_training_arg", "keras_home", "loss_tracker", "nested_layers",
           "optimizers_of", "unpack"]
