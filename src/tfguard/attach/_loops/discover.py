"""The models a loop's optimizer trains, found from the variables it updates.

A hand-written loop hands its optimizer variables, not a model. The
models alive in the process whose trainable variables those are, are the
ones it trains: found once per optimizer, at its first update, by looking
at the objects the garbage collector tracks (about 0.15 s with
TensorFlow and Keras loaded: paid once per optimizer, never per step). A
model nested in another one found (a GAN's generator inside the GAN
model) is the outer one's; a `Sequential`'s inner functional graph is the
`Sequential`'s.

Example:

>>> import keras
>>> inner = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)], name="inner")
>>> outer = keras.Sequential([keras.Input((2,)), inner], name="outer")
>>> [m.name for m in models_of(inner.trainable_variables)]
['outer']
"""

from __future__ import annotations

import gc

import keras

from tfguard._hooks import keras_compat


def _key(variable) -> int:
    return id(variable.value if isinstance(variable, keras.Variable) else variable)


def models_of(variables) -> list[keras.Model]:
    """The outermost models whose trainable variables include some of `variables`, most of them first."""
    wanted = {_key(v) for v in variables}
    if not wanted:
        return []
    found = []
    for candidate in gc.get_objects():
        if isinstance(candidate, keras.Model):
            try:
                shared = sum(_key(v) in wanted for v in candidate.trainable_variables)
            except Exception:  # a model half made (its __init__ raised): not a candidate
                continue
            if shared:
                found.append((candidate, shared))
    inner = set()
    for model, _ in found:
        inner.update(id(layer) for layer in keras_compat.nested_layers(model))
        graph = keras_compat.sequential_graph(model)
        if graph is not None:
            inner.add(id(graph))
    outer = [(m, n) for m, n in found if id(m) not in inner]
    outer.sort(key=lambda pair: -pair[1])
    return [m for m, _ in outer]


__all__ = ["models_of"]
