"""`LoopRecorder`: every hand-written training loop of the process, logged and diagnosed while it is open.

A loop that never calls `fit` (a `GradientTape` loop, eager or in a
`tf.function`, `train_on_batch`, a step wrapped with `tfguard.guard_step`)
shows itself at two places, and the recorder watches both while open:

* the optimizer's update: the recorder is an outside interceptor
  (`hooks.context.add_outside_interceptor`), added after the firewall's gate, so
  it sees each update before and after the gate wrote or rejected it. It
  places the update in its run (`runs.LoopRuns`: one per model or
  optimizer set) and records it on the run's recording steps
  (`update.record_update`);
* the loop's `Loss` calls and `Metric` updates (`patches.observing`): kept
  in the window of the code that made them (`windows`) until the update
  they belong to takes them.

Eagerly the models of a run are tapped at their first update
(`tape.LoopTape`: each layer's latest output, each model's first input),
and the taps come off at `close()`. A step compiled with XLA
(`jit_compile=True`) or run under a `tf.distribute` strategy is let
through unrecorded (a `py_function` cannot run there): its run says so.

`close()` removes everything it added, joins the violations of the
`guard_step`s used meanwhile and the gate's rejections to their runs, and
returns one `FitRecord` per run (`kind="loop"`), each with its
`Diagnosis`.

Example:

>>> import keras, numpy as np, tensorflow as tf
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)], name="reg")
>>> optimizer, loss_fn = keras.optimizers.SGD(0.01), keras.losses.MeanSquaredError()
>>> recorder = LoopRecorder(logdir=None, dense_steps=20).start()
>>> @tf.function
... def train_step(x, y):
...     with tf.GradientTape() as tape:
...         loss = loss_fn(y, model(x, training=True))
...     optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
>>> for _ in range(3):
...     train_step(np.ones((8, 3), "float32"), np.zeros((8, 1), "float32"))
>>> (record,) = recorder.close(first_index=1)
>>> record.run, record.kind, record.diagnosis.signals.series("batch/loss").steps.tolist()
('reg-loop', 'loop', [1, 2, 3])
"""

from __future__ import annotations

import contextlib

import tensorflow as tf

from tfguard._firewall import loop as firewall_loop
from tfguard._hooks import keras_compat, taps, tf_compat
from tfguard._hooks.context import add_outside_interceptor, remove_outside_interceptor
from tfguard.attach._loops.patches import ObservedCalls
from tfguard.attach._loops.run import LoopRun
from tfguard.attach._loops.runs import LoopRuns
from tfguard.attach._loops.tape import LoopTape
from tfguard.attach._loops.update import record_metric, record_update
from tfguard.attach._loops.windows import Observation, Windows
from tfguard.lint import describe_model, resolve_loss
from tfguard.lint._describe import describe_optimizer


class LoopRecorder:
    """Logs and diagnoses the hand-written loops of the process while open.

    Args:
        logdir: the log root: each run writes `<logdir>/<run>`. Defaults to `None` (no event files).
        hparams: hyperparameters of every run (the script's name). Defaults to `None`.
        guarded: whether the firewall's gate checks the updates (said in the records). Defaults to `False`.
        dense_steps: record each of the first this many steps. Defaults to `0`.
        every: then every this many steps (the Logger's `scalars_every`). Defaults to `10`.
    """

    def __init__(self, *, logdir: str | None = None, hparams: dict | None = None, guarded: bool = False,
                 dense_steps: int = 0, every: int = 10):
        self.logdir = logdir
        self.hparams = dict(hparams or {})
        self.guarded = guarded
        self.dense_steps = int(dense_steps)
        self.every = int(every)
        self.runs = LoopRuns(self._make_run)
        self.windows = Windows()
        self.tape = LoopTape()
        self._calls = ObservedCalls(self)
        self._stack: contextlib.ExitStack | None = None
        self._tapped: list = []
        self._loss_objects: dict[int, object] = {}  # id(run) -> the first Loss object its updates took
        self._steps_before: dict[int, int] = {}
        self.open = False

    def _make_run(self, name: str) -> LoopRun:
        return LoopRun(name, logdir=self.logdir, hparams=self.hparams, config={"loop": "hand-written (no fit)"},
                       dense_steps=self.dense_steps, every=self.every)

    # -- opening and closing ----------------------------------------------------------
    def start(self) -> LoopRecorder:
        """Watches the loops' updates, losses and metrics from now on; returns the recorder."""
        if self.open:
            return self
        self._steps_before = {id(step): len(step.events) for step in firewall_loop.guarded_steps()}
        stack = contextlib.ExitStack()
        self._calls.install()
        stack.callback(self._calls.remove)
        add_outside_interceptor(self)
        stack.callback(remove_outside_interceptor, self)
        stack.enter_context(taps.recording(self.tape))
        self._stack = stack
        self.open = True
        return self

    def close(self, first_index: int = 1) -> list:
        """Removes every hook and returns one `FitRecord` per run (see the module)."""
        if not self.open:
            return []
        self.open = False
        try:
            self._stack.close()
        finally:
            taps.uninstall(self._tapped)
            self._tapped = []
        self._join_guarded_steps()
        records = []
        for run in self.runs.runs:
            for optimizer in run.optimizers:  # rejections no recording update saw (an XLA step's)
                missing = firewall_loop.rejected_updates(optimizer) - run.rejected(optimizer)
                if missing > 0:
                    run.add_rejected(optimizer, missing)
            self._describe(run)
            for error in self._calls.errors:
                run.notes.append(f"a loss or metric could not be observed: {error}")
            records.append(run.close(first_index + len(records), guarded=self.guarded))
        return records

    @property
    def optimizers(self) -> list:
        """Every optimizer placed in a run."""
        return [o for run in self.runs.runs for o in run.optimizers]

    def _join_guarded_steps(self) -> None:
        for step in firewall_loop.guarded_steps():
            events = step.events[self._steps_before.get(id(step), 0):]
            if not events:
                continue
            run = next((r for r in self.runs.runs if any(m is step.model for m in r.models)), None)
            if run is None and self.runs.runs:
                run = self.runs.runs[-1]
            if run is not None:
                run.add_events(events)

    def _describe(self, run: LoopRun) -> None:
        """The run's model description, with the loop's loss and optimizer where Keras's compile says none."""
        if not run.models:
            return
        model = run.models[0]
        try:
            description = describe_model(model)
        except Exception as error:  # a model the description cannot read is diagnosed without it
            run.notes.append(f"the model could not be described: {type(error).__name__}")
            return
        loss = self._loss_objects.get(id(run))
        if loss is not None and not getattr(model, "compiled", False):
            description["loss"] = resolve_loss(loss).to_dict()
        if run.counting is not None:
            description["optimizer"] = describe_optimizer(run.counting)
        run.description = description

    # -- what the loop computes (patches.ObservedCalls) -----------------------------
    def loss(self, loss, y_true, value) -> None:
        self.windows.current().add(Observation("loss", loss, value, y_true))

    def metric(self, metric) -> None:
        window = self.windows.current()
        if not window.eager and window.updates and window.last_run is not None and self._records(window):
            record_metric(window.last_run, window, metric)
        else:
            window.add(Observation("metric", metric))

    # -- the optimizer's update (an outside interceptor) ------------------------------------
    def intercept_apply(self, optimizer, gradients, variables, scale, apply):
        del scale  # outside a step the interception is handed none; a LossScaleOptimizer's is read where it records
        if not self.open:
            return apply(gradients)
        window = self.windows.current()
        try:
            run = self.runs.run_for(optimizer, variables, window)
            run.add_variables(variables)
        except Exception as error:  # the update goes on whatever tfguard could not place
            self._calls.errors.append(f"an update could not be placed: {type(error).__name__}: {error}")
            return apply(gradients)
        observations = window.take()
        for seen in observations:
            if seen.kind == "loss":
                self._loss_objects.setdefault(id(run), seen.source)
        if not self._records(window, run):
            window.took_update(run)
            return apply(gradients)
        if window.eager:
            self._tap(run)
        result = record_update(run, window, optimizer, gradients, variables, apply, observations, self.tape)
        window.took_update(run)
        return result

    def _records(self, window, run: LoopRun | None = None) -> bool:
        """Whether this code can record: not compiled with XLA, not under a distribution strategy."""
        if tf_compat.in_xla_context():
            why = "its step is compiled with XLA (jit_compile=True): its updates were gated, not recorded"
        elif tf.distribute.has_strategy():
            why = "its step runs under a tf.distribute strategy: its updates were gated, not recorded"
        else:
            return True
        run = run or window.last_run
        if run is not None and why not in run.notes:
            run.notes.append(why)
        return False

    def _tap(self, run: LoopRun) -> None:
        for model in run.models:
            if model not in self.tape.models:
                self.tape.models.add(model)
                self._tapped.extend(taps.install([model, *keras_compat.nested_layers(model)]))


__all__ = ["LoopRecorder"]
