"""Which run an update of a hand-written loop belongs to: one run per model, or per optimizer set.

An optimizer is placed once, at its first update, with the models it
trains (`discover.models_of`). It joins the run of

1. another optimizer updated in the same traced function (a GAN's
   `train_step` applies the discriminator's and the generator's
   optimizers: one step, one run);
2. else another optimizer that trains one of its models (a backbone and a
   head with optimizers of their own);
3. else the optimizer updated just before it, when that one has counted
   one step so far (an eager GAN loop: its second optimizer appears in the
   first step);

or else starts a run of its own, named after its models
(`<model>-loop`, `<discriminator>+<generator>-loop`) or, training no
Keras model, after itself (`<optimizer>-loop`). The first optimizer of a
run counts its steps.

Example:

>>> import keras
>>> from tfguard.attach._loops.windows import Window
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)], name="net")
>>> runs = LoopRuns(lambda name: LoopRun(name, logdir=None, hparams={}))
>>> optimizer = keras.optimizers.SGD()
>>> runs.run_for(optimizer, model.trainable_variables, Window()).name
'net-loop'
"""

from __future__ import annotations

import re
from collections.abc import Callable

import tensorflow as tf

from tfguard._optimizer_state import optimizer_step
from tfguard.attach._loops.discover import models_of
from tfguard.attach._loops.run import LoopRun

_UNSAFE = re.compile(r"[^\w.+-]+")


def run_name(models: list, optimizer) -> str:
    """`<model>+<model>-loop`, or `<optimizer>-loop`, safe as a folder name."""
    names = [str(getattr(m, "name", "") or "model") for m in models] or [str(getattr(optimizer, "name", "optimizer"))]
    return _UNSAFE.sub("_", "+".join(names)).strip("._") + "-loop"


class LoopRuns:
    """The loop runs of a session, and which optimizer belongs to which.

    Args:
        make_run: `make_run(name) -> LoopRun`.
    """

    def __init__(self, make_run: Callable[[str], LoopRun]):
        self.make_run = make_run
        self.runs: list[LoopRun] = []
        self._of: dict[int, LoopRun] = {}
        self._last: LoopRun | None = None

    def known(self, optimizer) -> LoopRun | None:
        """The run of an optimizer already placed."""
        return self._of.get(id(optimizer))

    def run_for(self, optimizer, variables, window) -> LoopRun:
        """The run of an update of `optimizer` (placed now if it is new)."""
        run = self._of.get(id(optimizer))
        if run is None:
            models = models_of(variables)
            run = self._join(models, window)
            if run is None:
                run = self.make_run(run_name(models, optimizer))
                self.runs.append(run)
            label = models[0].name if models else str(getattr(optimizer, "name", "optimizer"))
            run.add_optimizer(optimizer, label, models)
            if run.log is None or run.log.path is None:
                run.name = run_name(run.models, run.counting)
            self._of[id(optimizer)] = run
        self._last = run
        return run

    def _join(self, models: list, window) -> LoopRun | None:
        if window.runs:
            return window.runs[-1]
        for run in self.runs:
            if any(m is r for m in models for r in run.models):
                return run
        last = self._last
        if last is None or last.counting is None:
            return None
        with tf.init_scope():  # the step as it is, also while a function traces
            first_step = optimizer_step(last.counting) <= 1
        return last if first_step else None


__all__ = ["LoopRuns", "run_name"]
