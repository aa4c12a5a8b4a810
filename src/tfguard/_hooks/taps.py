"""Taps on layer outputs: record what each layer returns during one forward pass.

A tap wraps a layer's `call` on the instance. It records only while a
`recording()` context is active (inside the guarded train step, or during a
replay), so `predict`, `evaluate` and exports run the layer untouched.

Example:

>>> import keras
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="d")])
>>> [layer.name for layer in install(model.layers)]
['d']
>>> with recording() as tape:
...     _ = model(keras.ops.ones((1, 3)))
>>> [layer.name for layer, _ in tape.records]
['d']
>>> uninstall(model.layers)
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterable, Iterator

import keras
import tensorflow as tf

from tfguard import _seam
from tfguard._hooks import keras_compat

_ACTIVE = threading.local()
_MARK = "_tfguard_original_call"


class Tape:
    """The `(layer, output)` pairs recorded in call order (a layer completes, it is recorded).

    Only calls made in the graph the recording started in are recorded: a
    layer Keras builds lazily at its first call runs once in a scratch graph
    (and a layer called inside a `cond` runs in a branch), and a tensor of
    such a graph cannot be used by the step.
    """

    def __init__(self):
        self.records: list[tuple[keras.layers.Layer, object]] = []
        self.graph = None

    def start(self) -> None:
        """Marks the graph (or eager mode) that the calls to record run in."""
        self.graph = None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()

    def record(self, layer: keras.layers.Layer, args: tuple, outputs) -> None:
        """Keeps one completed call (a tape of its own may keep its inputs, `args`, too)."""
        del args
        self.records.append((layer, outputs))

    def takes(self) -> bool:
        """Whether a call completing now is in the recording's own graph."""
        if tf.executing_eagerly():
            return self.graph is None
        return tf.compat.v1.get_default_graph() is self.graph


@contextlib.contextmanager
def recording(tape: Tape | None = None) -> Iterator[Tape]:
    """Records tapped layers' outputs in this thread while the context is open (into `tape`, or a new one)."""
    tape = tape if tape is not None else Tape()
    tape.start()
    previous = getattr(_ACTIVE, "tape", None)
    _ACTIVE.tape = tape
    try:
        yield tape
    finally:
        _ACTIVE.tape = previous


def _tapped(layer: keras.layers.Layer, original):
    @functools.wraps(original)
    def call(*args, **kwargs):
        outputs = original(*args, **kwargs)
        tape = getattr(_ACTIVE, "tape", None)
        if tape is not None and tape.takes():
            tape.record(layer, args, outputs)
        return outputs

    return call


def is_tapped(layer: keras.layers.Layer) -> bool:
    """Whether `layer` carries a tap."""
    return _MARK in layer.__dict__


def install(layers: Iterable[keras.layers.Layer]) -> list[keras.layers.Layer]:
    """Taps every layer (once); returns those newly tapped (what the caller's `uninstall` takes off)."""
    added = []
    for layer in layers:
        if isinstance(layer, keras.layers.InputLayer) or _MARK in layer.__dict__:
            continue
        original = layer.call
        object.__setattr__(layer, _MARK, original)
        _seam.replace(layer, "call", _tapped(layer, original))
        added.append(layer)
    return added


def uninstall(layers: Iterable[keras.layers.Layer]) -> None:
    """Removes the taps, restoring each layer's own `call`."""
    for layer in layers:
        if _MARK in layer.__dict__:
            _seam.restore(layer, "call")
            object.__delattr__(layer, _MARK)


def tap(model: keras.Model) -> list[keras.layers.Layer]:
    """Taps every layer nested in `model` not tapped yet; returns those (what the caller's `uninstall` takes off).

    The layers whose outputs the forward stage and the activation
    signals watch: the guarded step and replays tap so, and a GAN's or a
    VAE's inner layers are watched too.
    """
    return install(keras_compat.nested_layers(model))
