"""The eager loop's taps: the latest output of each layer of its models, and the models' first input.

Eagerly, a step's tensors exist only while it runs: the layers of a
loop's models are tapped (`tfguard._hooks.taps`) once its first update
named them, and a `LoopTape` keeps, from one update to the next, each
layer's latest output (for the dead and saturated fractions) and the first
input each model was called with (for `data/input_*`). It keeps one value
per layer, whatever the loop calls in between (a validation pass): its
memory does not grow with the run.

Example:

>>> import keras, numpy as np
>>> from tfguard._hooks import taps
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="d")], name="m")
>>> added = taps.install([model, *model.layers])
>>> tape = LoopTape()
>>> tape.models.add(model)
>>> with taps.recording(tape):
...     _ = model(np.ones((4, 3), "float32"))
>>> outputs, inputs = tape.take()
>>> [layer.name for layer, _ in outputs], [(m.name, tuple(x.shape)) for m, x in inputs]
(['d', 'm'], [('m', (4, 3))])
>>> taps.uninstall(added)
"""

from __future__ import annotations

import weakref

from tfguard._hooks import taps


class LoopTape(taps.Tape):
    """Each tapped layer's latest output and each model's first input since the last `take`."""

    def __init__(self):
        super().__init__()
        self.models: weakref.WeakSet = weakref.WeakSet()  # the models whose input is kept
        self._latest: dict[int, tuple] = {}
        self._inputs: dict[int, object] = {}

    def record(self, layer, args: tuple, outputs) -> None:
        self._latest.pop(id(layer), None)
        self._latest[id(layer)] = (layer, outputs)
        if args and layer in self.models and id(layer) not in self._inputs:
            self._inputs[id(layer)] = (layer, args[0])

    def take(self) -> tuple[list, list]:
        """`([(layer, output)], [(model, its first input)])` since the last take, in call order; both start again."""
        outputs, inputs = list(self._latest.values()), list(self._inputs.values())
        self._latest, self._inputs = {}, {}
        return outputs, inputs


__all__ = ["LoopTape"]
