"""`tfguard.Logger`: the Keras callback that writes a run for TensorBoard.

One run directory per training (`run_dir(logdir, model.name, hparams)`),
every tag of `tfguard._tags` in it, all at one global step: the optimizer's
`iterations` after the step. What it writes:

* per epoch: `train/<metric>`, `val/<metric>`, `train/epoch`,
  `optimizer/learning_rate` (schedules included), `perf/steps_per_second`,
  and `guard/violations`, `guard/skipped` for a guarded model;
* every `scalars_every` steps: `batch/<metric>`, the learning rate, the
  speed, the firewall's signals (`grad_norm/global`, `grad_norm/<layer>`,
  `zero_grad_fraction/<layer>`, `activation/dead_fraction/<layer>`,
  `activation/saturated_fraction/<layer>`, `data/input_*`, `data/label_*`,
  `weight_norm/<layer>` and `update_ratio/<layer>`);
* every `histograms_every` steps (and where `record_if(step)` holds):
  `hist/weights/<variable>`, `hist/gradients/<variable>`,
  `hist/activations/<layer>`;
* once: `images/inputs` (a few samples of the first batch), `config/hparams`
  (markdown table), `config/model` (JSON from `tfguard.lint.describe_model`),
  `config/lint` (JSON list of `tfguard.lint.lint` findings for the model and,
  when the step is instrumented, its first batch), the HParams tab's
  experiment and session, and with `embeddings=` a projector at the end of
  training (the lint package is imported lazily and skipped if missing);
* for every firewall violation: `guard/events` (one markdown line saying
  where) and the counters;
* for every invariant check of a correct program (`tfguard.invariants`:
  after the first step and at epoch ends): `invariants/records`, one JSON
  object per check, passed or not;
* when the model is compiled again between its fits (`begin_phase`: a
  fine-tuning phase after transfer learning), the steps go on where the
  last phase ended, and `config/phases` (one JSON object per phase) and
  the `config/hparams` table, with a row per phase, are written again.

Everything step-level comes from the model's instrumentation
(`tfguard.instrument`): the signals, weight norms and update ratios are
computed once, in the graph, by the recording trace of the step, in
branches that run on the recording steps only (a model that is not guarded
runs a graph with no signal op on the other steps, once they have run long
enough to be worth its trace; a guarded model, whose step holds every value
anyway, has the one trace); a guarded model shares
the very same step. The callback has no batch hook:
Keras calls it at the epoch ends, and the step calls it on recording steps.
A step records when the optimizer's `iterations` before it is a multiple of
`scalars_every` (`histograms_every`), so with `scalars_every=10` the points
sit at steps 1, 11, 21, ...

Under `tf.distribute.MultiWorkerMirroredStrategy` only the chief writes
(`tfguard._distribute.multiworker.is_chief`): every worker asks the step for the
same signals (they trace the same step), but the others write nothing, not
even a run directory. Every training session opens its event file with
`SessionLog.START` at the first step it trains, as TensorFlow's supervisors
did: when a run resumes from a checkpoint (training starts at a step > 0 in
a run directory that already holds events: `run_subdir=False`, or a later
`fit` of the same logger) TensorBoard (and `tfguard.events`) then drop the
values the killed session wrote after its last checkpoint, and the guard
counters go on from the values on disk. A step
whose update the guard skipped writes no batch-level values (the global
step did not move; its guard event says what happened).

The logs reach the disk at every epoch end, at the end of training, and
when training ends badly. Keras does not call `on_train_end` when `fit`
raises, so for the duration of `fit` the logger wraps the model's train
function (an exception of the step, where training spends its time: a
`GuardViolation`, a data error, closes the run before it propagates, with
no need to wrap `fit`), installs SIGTERM and SIGINT handlers (they flush,
close on the default action, and chain to the previous handler, so Ctrl-C
has the logs on disk wherever the `KeyboardInterrupt` lands), and registers
an exit hook; `with Logger(...) as logger:` closes in every case. A
read-only or full disk never costs the run: the logger warns once
(`SummaryWarning`) and training goes on, or with `strict=True` stops with
`tfguard._errors.SummaryWriteError`.

The callback is made of one module per job: `logger_options` checks its
arguments, `run_start` writes what a run writes once, `step_listener` hears
the step's records, the firewall's events and the invariant checks,
`step_queue` holds the values until they are written in step order, and
`run_end` ends the run in every way it can end.

Example:

>>> import keras, numpy as np, os, tempfile, tfguard
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
>>> model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
>>> logger = tfguard.summary.Logger(tempfile.mkdtemp(), {"lr": 1e-3}, scalars_every=2)
>>> _ = model.fit(np.random.rand(32, 4), np.arange(32) % 3, batch_size=8, verbose=0, callbacks=[logger])
>>> os.path.basename(logger.run_path).startswith("lr_1e-3_")
True
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Mapping

import keras

from tfguard import _tags
from tfguard._firewall import instrument, instrumentation_of
from tfguard._optimizer_state import model_step
from tfguard.lint._describe import applying_optimizer
from tfguard.summary import _lifecycle, _runinfo
from tfguard.summary._keras_args import KerasArguments
from tfguard.summary._keras_writes import weight_values
from tfguard.summary._listening import Listening
from tfguard.summary._logger_options import (
    check_callables,
    check_every,
    histogram_kinds,
    log_root,
    sample_images,
)
from tfguard.summary._profiler import BatchProfiler
from tfguard.summary._run_end import RunEnd
from tfguard.summary._run_start import RunStart
from tfguard.summary._speed import SpeedMeter
from tfguard.summary._step_listener import StepListener
from tfguard.summary._step_queue import StepQueue
from tfguard.summary._summary_values import scalar_value, text_value
from tfguard.summary._writers import (
    DEFAULT_FILENAME_SUFFIX,
    DEFAULT_FLUSH_MILLIS,
    DEFAULT_MAX_QUEUE,
    RunWriter,
)


class Logger(RunStart, StepListener, RunEnd, keras.callbacks.Callback):
    """Writes a training run for TensorBoard: scalars, health signals, histograms, images, text, hparams.

    See the module docstring for every tag. Writers are created lazily, on
    the first write, in one run directory `logdir/<model.name>/<hparams>_<time>`
    (`tfguard.summary.run_dir`); `run_path` tells which.

    Example:

    >>> import tempfile
    >>> logger = Logger(tempfile.mkdtemp(), {"units": 32}, scalars_every=5, histograms=["weights"])
    >>> logger.max_queue, logger.flush_millis, logger.filename_suffix
    (10, 10000, '.v2')

    The arguments of `keras.callbacks.TensorBoard` (`log_dir`,
    `histogram_freq`, `write_graph`, `write_images`, `write_steps_per_second`,
    `update_freq`, `profile_batch`, `embeddings_freq`, `embeddings_metadata`)
    are taken with the same meaning (`tfguard.summary._keras_args`), so
    replacing one callback by the other is a one-word change. Every
    `Embedding` table goes to the projector at the end of training (and every
    `embeddings_freq` epochs), labelled with the vocabulary of the lookup
    layer that feeds it.

    Args:
        logdir: the log root (or, with `run_subdir=False`, the run directory).
            Defaults to `None` (`log_dir`, else `"logs"` as Keras).
        hparams: the run's hyper-parameters: in the run directory name, the
            `config/hparams` table and TensorBoard's HParams tab. Defaults to `None`.
        log_dir: Keras's name for `logdir`. Defaults to `None`.
        histogram_freq: Keras's: weight histograms every this many epochs
            (`0`: no histogram at all). Defaults to `None` (the step schedule).
        write_graph: Keras's: the model's graph for the Graphs tab. Defaults to `True`.
        write_images: Keras's: weights as images with the epoch histograms.
            Defaults to `False`.
        write_steps_per_second: Keras's; the speed is always written. Defaults to `False`.
        update_freq: Keras's: `"batch"`, `"epoch"` or N steps for batch values.
            Defaults to `"epoch"` (the `scalars_every` schedule).
        profile_batch: Keras's: the batches to profile (an int, a pair or
            `"start,stop"`; `0`: none). Defaults to `0`.
        embeddings_freq: Keras's: the projector every this many epochs (and at
            the end of training in every case). Defaults to `0`.
        embeddings_metadata: Keras's: a labels file per embedding layer name,
            or one for all. Defaults to `None`.
        scalars_every: write step-level scalars every this many steps; `0`
            writes per-epoch scalars only. Defaults to `10`.
        histograms_every: write histograms every this many steps (`0` = never).
            Defaults to `100`.
        histograms: `True` for weights, gradients and activations, `False`
            for none, or a subset of `("weights", "gradients", "activations")`.
            Defaults to `True`.
        images: sample inputs as `images/inputs`: `None` writes 3 samples of
            the first batch if it looks like images (when signals are on, i.e.
            the step is instrumented), an integer that many samples (`0`
            none), an array those images (at the start). Defaults to `None`.
        embeddings: `(layer_name or callable, samples, labels)` writes a
            projector at the end of training: the layer's output (or
            `callable(samples)`) for `samples`, labelled by `labels` (may be
            `None`, or the tuple may have two items). Defaults to `None`.
        record_if: `record_if(step) -> bool`, consulted on each histogram
            step: histograms are written only where it holds, and a step
            that records nothing else then runs without computing them (use
            `histograms_every=1` for a free-form schedule). It must answer
            alike on every worker of a multi-worker run (the workers must
            run the same step). Defaults to `None`.
        hparam_domains: name -> an `hp` Domain or list of values, overriding
            the domains inferred for the HParams tab (pass the whole search
            space of a sweep). Defaults to `None`.
        run_subdir: create `logdir/<model>/<hparams>_<time>`; `False` writes
            into `logdir` itself. Defaults to `True`.
        max_queue: events buffered before writing (one event per logged step).
            Defaults to `10`.
        flush_millis: a write this long after the last flush flushes.
            Defaults to `10000`.
        filename_suffix: event file name suffix. Defaults to `".v2"`.
        strict: a failed write raises `tfguard._errors.SummaryWriteError`
            (training stops) instead of one `SummaryWarning` and no more logs.
            Defaults to `False`.
        invariants: run the invariant checks of a correct program
            (`tfguard.invariants._watch`) and write their records. Defaults to `True`.

    Raises:
        ContractError: for an invalid option.
    """

    dense_steps: int = 0
    """Observe each of the first this many recording steps, then every `scalars_every`
    (`tfguard run` sets 20, as for its live diagnosis: a run that explodes within a few steps
    shows its growth only step by step)."""

    step_offset: int = 0
    """Added to the optimizer's step in everything written: the steps of the run's earlier
    training phases (`begin_phase`)."""

    def __init__(
        self,
        logdir=None,
        hparams: Mapping | None = None,
        *,
        log_dir=None,
        histogram_freq: int | None = None,
        write_graph: bool = True,
        write_images: bool = False,
        write_steps_per_second: bool = False,
        update_freq="epoch",
        profile_batch=0,
        embeddings_freq: int = 0,
        embeddings_metadata=None,
        scalars_every: int = 10,
        histograms_every: int = 100,
        histograms=True,
        images=None,
        embeddings=None,
        record_if: Callable[[int], bool] | None = None,
        hparam_domains: Mapping | None = None,
        run_subdir: bool = True,
        max_queue: int = DEFAULT_MAX_QUEUE,
        flush_millis: int = DEFAULT_FLUSH_MILLIS,
        filename_suffix: str = DEFAULT_FILENAME_SUFFIX,
        strict: bool = False,
        invariants: bool = True,
    ):
        super().__init__()
        self.invariants = bool(invariants)
        self._watch = None
        logdir = log_root(logdir, log_dir)
        self.keras = KerasArguments.parse(
            histogram_freq=histogram_freq, write_graph=write_graph, write_images=write_images,
            write_steps_per_second=write_steps_per_second, update_freq=update_freq,
            profile_batch=profile_batch, embeddings_freq=embeddings_freq,
            embeddings_metadata=embeddings_metadata)
        if histogram_freq == 0:  # Keras's "no histograms", said explicitly
            histograms = False
        scalars_every = self.keras.scalars_every(scalars_every)
        check_callables(hparams, record_if, embeddings)
        images = sample_images(images)
        self.logdir = logdir
        self.hparams = dict(hparams or {})
        self.scalars_every = check_every("scalars_every", scalars_every)
        self.histograms_every = check_every("histograms_every", histograms_every)
        self.histogram_kinds = histogram_kinds(histograms) if self.histograms_every else ()
        self.images = images
        self.embeddings = tuple(embeddings) if embeddings is not None else None
        self.record_if = record_if
        self.hparam_domains = dict(hparam_domains or {})
        self.run_subdir = bool(run_subdir)
        self.strict = bool(strict)
        self._writer = RunWriter(
            self._make_run_dir,
            max_queue=max_queue,
            flush_millis=flush_millis,
            filename_suffix=filename_suffix,
            strict=strict,
        )
        self._inst = None
        self._listening = Listening(None, self._on_guard_event, self._on_invariant)
        self._queue = StepQueue()  # values waiting to be written, by step
        self._training = False
        self._finished = True
        self._wrapper = None
        self._signal_hooks = [
            _lifecycle.SignalHook(lambda final: self._on_signal(final, "SIGTERM"), signal.SIGTERM),
            _lifecycle.SignalHook(lambda final: self._on_signal(final, "SIGINT"), signal.SIGINT),
        ]
        self._session_started = False
        self._config_text_written = False
        self._config_written = False
        self._metric_tags: set[str] = set()
        self._step = 0
        self._first_step = 1
        self._guard_offsets = (0, 0)
        self._counters_queued: tuple | None = None  # (step, counts) of the guard counters last queued
        self._describe_again = False  # a subclassed model unbuilt at the run's start: described at an epoch's end
        self._described_applying = False
        self._speed = SpeedMeter()
        self._test_started: float | None = None
        self._first_images = None
        self._images_written = False
        self._first_lint: str | None = None
        self._lint_written = False
        self.pipeline_lint: list = []  # static findings of the input pipeline, written with config/lint
        self._peek_wants = (False, False)
        self._failure: dict | None = None
        self._next_epoch = 0
        self._profiler = BatchProfiler(self.keras.profile_batch, lambda: self.run_path) \
            if self.keras.profile_batch else None
        self.phases: list[dict] = []  # the run's training phases, once it has more than one

    # -- settings --------------------------------------------------------------
    @property
    def max_queue(self) -> int:
        """Events buffered before writing. Defaults to `10`."""
        return self._writer.max_queue

    @property
    def flush_millis(self) -> int:
        """A write this long after the last flush flushes. Defaults to `10000`."""
        return self._writer.flush_millis

    @property
    def filename_suffix(self) -> str:
        """Event file name suffix. Defaults to `".v2"`."""
        return self._writer.filename_suffix

    @property
    def run_path(self) -> str | None:
        """The run directory, once the first summary created it (else `None`)."""
        return self._writer.path

    @property
    def active(self) -> bool:
        """`False` once a write failed (non-strict): nothing more is written."""
        return self._writer.active

    # -- wiring ----------------------------------------------------------------
    @property
    def _wants_signals(self) -> bool:
        return self.scalars_every > 0 or bool(self.histogram_kinds)

    def set_model(self, model):
        super().set_model(model)
        if self._inst is None or self._inst.model is not model:
            self._inst = instrument(model) if self._wants_signals else instrumentation_of(model)
        self._listen(True)

    # -- the run -----------------------------------------------------------------
    def on_train_begin(self, logs=None):
        self._guarded(self._train_begin)

    def on_epoch_end(self, epoch, logs=None):
        if self._training:
            self._guarded(self._epoch_end, epoch, logs)

    def _epoch_end(self, epoch, logs):
        self._first_batch_values()
        self._step = step = self._read_step()
        applying = applying_optimizer(self.model)
        if (self._describe_again and self.model.built) or (
                applying is not None and applying is not getattr(self.model, "optimizer", None)
                and not self._described_applying):
            # built by its first step, or trained by a custom train_step's own optimizer, not
            # the one compile() gave it: the description the reader takes is the last one
            self._describe_again = False
            self._described_applying = applying is not getattr(self.model, "optimizer", None)
            description = _runinfo.model_description(self.model)
            if description is not None:
                self._queue.add(step, [text_value(_tags.CONFIG_MODEL, description)])
        epoch = max(int(epoch), self._next_epoch)  # fits of one model continue one history
        self._next_epoch = epoch + 1
        if self._watch is not None:
            self._watch.end_epoch(epoch)  # its records join this step's values
        epoch_values = _runinfo.epoch_values(epoch, logs, applying)
        self._metric_tags.update(tag for tag in epoch_values if _tags.is_metric(tag))
        values = [scalar_value(tag, value) for tag, value in epoch_values.items()]
        values.extend(self._speed.scalars(step))
        values.extend(self._guard_counters(step))
        pictures = []
        if self.keras.epoch_histograms(epoch):  # Keras's histogram_freq: weights at epoch ends
            histograms, pictures = weight_values(self.model, images=self.keras.write_images)
            values.extend(histograms)
        self._queue.add(step, values)
        self._emit()
        for tag, images in pictures:
            self._writer.image(step, tag, images, max_outputs=len(images))
        if self.keras.epoch_embeddings(epoch):
            self._write_tables()
        if not self._config_written:
            self._write_experiment()
        self._writer.flush()

    def on_test_begin(self, logs=None):
        self._test_started = time.perf_counter()

    def on_test_end(self, logs=None):
        if self._test_started is not None:
            self._speed.pause(time.perf_counter() - self._test_started)
            self._test_started = None

    def on_train_end(self, logs=None):
        if self._training:
            self._finish("success")

    def begin_phase(self, step_offset: int, phases: list[dict]) -> None:
        """The next fit starts a new training phase of the run (its model was compiled again).

        A compiled-again model's optimizer counts its steps from its own start: the run's steps go
        on from `step_offset` (its steps so far, less the new optimizer's count). The next fit
        writes its configuration again, with one row per phase, and `config/phases` (`phases`:
        one dict per phase, as `tfguard.diagnose.Diagnosis.phases`).
        """
        self.step_offset = int(step_offset)
        self.phases = [dict(p) for p in phases]
        self._config_text_written = False

    # -- helpers -------------------------------------------------------------------
    def _read_step(self) -> int:
        step = self._inst.global_step() if self._inst is not None else model_step(self.model)
        return step + self.step_offset

    def _mark_speed(self) -> None:
        """Steps per second count from here: after the fit's first steps (their traces compiled)."""
        self._speed.mark(self._read_step())

    def _emit(self) -> None:
        self._queue.emit(self._writer, self.active)


__all__ = ["Logger"]
