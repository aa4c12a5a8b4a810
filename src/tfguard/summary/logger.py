"""`tfguard.Logger`: the Keras callback that writes a run for TensorBoard.

One run directory per training (`run_dir(logdir, model.name, hparams)`),
every tag of `tfguard.tags` in it, all at one global step: the optimizer's
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
  object per check, passed or not.

Everything step-level comes from the model's instrumentation
(`tfguard.instrument`): the signals, weight norms and update ratios are
computed once, in the graph, by the recording trace of the step, in
branches that run on the recording steps only (a model that is not guarded
runs a graph with no signal op on the other steps; a guarded model, whose
step holds every value anyway, has the one trace); a guarded model shares
the very same step. The callback has no batch hook:
Keras calls it at the epoch ends, and the step calls it on recording steps.
A step records when the optimizer's `iterations` before it is a multiple of
`scalars_every` (`histograms_every`), so with `scalars_every=10` the points
sit at steps 1, 11, 21, ...

Under `tf.distribute.MultiWorkerMirroredStrategy` only the chief writes
(`tfguard.distribute.multiworker.is_chief`): every worker asks the step for the
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
`tfguard.errors.SummaryWriteError`.

Example:

>>> import keras, numpy as np, tempfile, tfguard
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
>>> model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
>>> logger = tfguard.summary.Logger(tempfile.mkdtemp(), {"lr": 1e-3}, scalars_every=2)
>>> _ = model.fit(np.random.rand(32, 4), np.arange(32) % 3, batch_size=8, verbose=0, callbacks=[logger])
>>> os.path.basename(logger.run_path).startswith("lr_1e-3_")
True
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Mapping

import keras
import numpy as np

from tfguard import tags
from tfguard.distribute.multiworker import is_chief
from tfguard.errors import ContractError, SummaryWriteError
from tfguard.findings import strict_json
from tfguard.firewall import instrument, instrumentation_of
from tfguard.invariants import watch as invariant_watch
from tfguard.lint.failure import end_record, failure_record
from tfguard.optimizer_state import model_step
from tfguard.summary import hparams as hparams_module
from tfguard.summary import lifecycle, runinfo
from tfguard.summary.first_batch import peek_first_batch
from tfguard.summary.images import unit_images
from tfguard.summary.keras_args import KerasArguments
from tfguard.summary.keras_writes import model_graph_value, weight_values, write_embedding_tables
from tfguard.summary.profiler import BatchProfiler
from tfguard.summary.projector import check_embedding_source, compute_embeddings, write_projector
from tfguard.summary.resume import guard_offsets, resumed
from tfguard.summary.rundir import run_dir
from tfguard.summary.runinfo import guard_event_json, guard_event_line
from tfguard.summary.speed import SpeedMeter
from tfguard.summary.writers import (
    DEFAULT_FILENAME_SUFFIX,
    DEFAULT_FLUSH_MILLIS,
    DEFAULT_MAX_QUEUE,
    WRITE_ERRORS,
    RunWriter,
    histogram_value,
    scalar_value,
    session_start_event,
    text_value,
)

HISTOGRAM_KINDS = ("weights", "gradients", "activations")
DEFAULT_IMAGES = 3
def _check_every(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ContractError(
            f"Received an invalid value for `{name}`, expected an integer >= 0 (0 = never). "
            f"Received: {name}={value!r}"
        )
    return int(value)


def _histogram_kinds(histograms) -> tuple[str, ...]:
    if histograms is True:
        return HISTOGRAM_KINDS
    if histograms is False or histograms is None:
        return ()
    if isinstance(histograms, str):
        histograms = (histograms,)
    kinds = tuple(histograms)
    unknown = [k for k in kinds if k not in HISTOGRAM_KINDS]
    if unknown:
        raise ContractError(
            f"Received an invalid value for `histograms`, expected True, False or a subset of "
            f"{HISTOGRAM_KINDS}. Received: histograms={histograms!r}"
        )
    return kinds


class Logger(keras.callbacks.Callback):
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
    are taken with the same meaning (`tfguard.summary.keras_args`), so
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
        strict: a failed write raises `tfguard.errors.SummaryWriteError`
            (training stops) instead of one `SummaryWarning` and no more logs.
            Defaults to `False`.
        invariants: run the invariant checks of a correct program
            (`tfguard.invariants.watch`) and write their records. Defaults to `True`.

    Raises:
        ContractError: for an invalid option.
    """

    dense_steps: int = 0
    """Observe each of the first this many recording steps, then every `scalars_every`
    (`tfguard run` sets 20, as for its live diagnosis: a run that explodes within a few steps
    shows its growth only step by step)."""

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
        if logdir is not None and log_dir is not None and os.fspath(logdir) != os.fspath(log_dir):
            raise ContractError(
                "Received both `logdir` and `log_dir` (Keras's name), expected one of them. "
                f"Received: logdir={os.fspath(logdir)!r}, log_dir={os.fspath(log_dir)!r}")
        logdir = logdir if logdir is not None else (log_dir if log_dir is not None else "logs")
        if not os.fspath(logdir):
            raise ContractError("Received an invalid value for `logdir`, expected a directory path. Received: logdir=''")
        self.keras = KerasArguments.parse(
            histogram_freq=histogram_freq, write_graph=write_graph, write_images=write_images,
            write_steps_per_second=write_steps_per_second, update_freq=update_freq,
            profile_batch=profile_batch, embeddings_freq=embeddings_freq,
            embeddings_metadata=embeddings_metadata)
        if histogram_freq == 0:  # Keras's "no histograms", said explicitly
            histograms = False
        scalars_every = self.keras.scalars_every(scalars_every)
        if hparams is not None and not isinstance(hparams, Mapping):
            raise ContractError(
                f"Received an invalid value for `hparams`, expected a mapping name -> value. Received: {type(hparams).__name__}"
            )
        if record_if is not None and not callable(record_if):
            raise ContractError(
                f"Received an invalid value for `record_if`, expected a function step -> bool. Received: {record_if!r}"
            )
        if embeddings is not None and not (isinstance(embeddings, (tuple, list)) and len(embeddings) in (2, 3)):
            raise ContractError(
                "Received an invalid value for `embeddings`, expected (layer_name or callable, samples, labels). "
                f"Received: {type(embeddings).__name__}"
            )
        if isinstance(images, bool):
            images = DEFAULT_IMAGES if images else 0
        if isinstance(images, (int, np.integer)):
            images = _check_every("images", images)
        self.logdir = os.fspath(logdir)
        self.hparams = dict(hparams or {})
        self.scalars_every = _check_every("scalars_every", scalars_every)
        self.histograms_every = _check_every("histograms_every", histograms_every)
        self.histogram_kinds = _histogram_kinds(histograms) if self.histograms_every else ()
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
        self._pending: dict[int, list] = {}
        self._training = False
        self._finished = True
        self._wrapper = None
        self._signal_hooks = [
            lifecycle.SignalHook(lambda final: self._on_signal(final, "SIGTERM"), signal.SIGTERM),
            lifecycle.SignalHook(lambda final: self._on_signal(final, "SIGINT"), signal.SIGINT),
        ]
        self._session_started = False
        self._config_text_written = False
        self._config_written = False
        self._metric_tags: set[str] = set()
        self._step = 0
        self._written_step = 0  # the largest step written: the end record goes at or after it
        self._first_step = 1
        self._guard_offsets = (0, 0)
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

    def _make_run_dir(self) -> str:
        if not self.run_subdir:
            os.makedirs(self.logdir, exist_ok=True)
            return self.logdir
        name = getattr(self.model, "name", None) or "model"
        return run_dir(self.logdir, name, self.hparams)

    # -- wiring ----------------------------------------------------------------
    @property
    def _wants_signals(self) -> bool:
        return self.scalars_every > 0 or bool(self.histogram_kinds)

    def set_model(self, model):
        super().set_model(model)
        if self._inst is None or self._inst.model is not model:
            self._inst = instrument(model) if self._wants_signals else instrumentation_of(model)
        self._listen(True)

    def _listen(self, on: bool) -> None:
        """Subscribes to the step records; every worker does (the workers must run the same step)."""
        inst = self._inst
        if inst is None:
            return
        if not on:
            inst.unsubscribe(self._on_record)
            inst.remove_event_listener(self._on_guard_event)
            return
        if self._wants_signals:
            dense = self.scalars_every and getattr(self, "_records", 0) < self.dense_steps
            inst.subscribe(
                self._on_record,
                scalars_every=1 if dense else self.scalars_every,
                histograms_every=self.histograms_every if self.histogram_kinds else 0,
                histogram_kinds=self.histogram_kinds,
                weights=bool(self.scalars_every),
                histogram_filter=self._histogram_filter if self.record_if is not None else None,
            )
        inst.add_event_listener(self._on_guard_event)

    def _histogram_filter(self, step: int) -> bool:
        """`record_if(step)`, asked once per histogram step."""
        return bool(self._guarded(self.record_if, step))

    # -- the run -----------------------------------------------------------------
    def on_train_begin(self, logs=None):
        self._guarded(self._train_begin)

    def _train_begin(self):
        model = self.model
        self._listen(True)  # again after an earlier fit's end
        if not is_chief(getattr(model, "distribute_strategy", None)):
            return  # only the chief writes; the step still computes the requested signals
        self._finished = False
        self._failure = None
        self._training = True
        self._pending = {}
        self._speed.reset()
        self._step = self._read_step()
        self._first_step = self._step + 1
        lifecycle.register_open(self)
        for hook in self._signal_hooks:
            hook.install()
        if self.embeddings is not None:
            check_embedding_source(model, self.embeddings[0])
        # Auto mode peeks only through the instrumented step (a host loop already);
        # Keras's own train function would trace its Python-iterator path once more.
        pulls_on_host = getattr(model.train_function, "_tfguard", False)
        want_images = not self._images_written and (
            (self.images is None and pulls_on_host) or (isinstance(self.images, int) and self.images > 0)
        )
        want_lint = not self._lint_written and pulls_on_host
        self._peek_wants = (want_images, want_lint)
        self._wrapper = lifecycle.wrap_train_function(
            model, self._on_step_error, peek=self._peek_first_batch if (want_images or want_lint) else None,
            on_warm=self._mark_speed,
            around=self._profiler.around if self._profiler is not None else None,
        )
        if not self.active:
            return
        self._guard_offsets = (0, 0)
        self._start_session()
        if not self._config_text_written:
            self._write_config()
            graph = model_graph_value(model) if self.keras.write_graph else None
            if graph is not None:
                self._writer.write(self._step, [graph])
        self._begin_invariants()
        if not self._lint_written and not want_lint:
            self._lint_written = self._writer.write(
                self._step, [text_value(tags.CONFIG_LINT,
                                        runinfo.lint_json(model, extra=self.pipeline_lint))]
            )
        if self.images is not None and not isinstance(self.images, int) and not self._images_written:
            self._images_written = self._writer.image(
                self._step, tags.IMAGES_INPUTS, unit_images(self.images, len(self.images)),
                max_outputs=len(self.images),
            )

    def on_epoch_end(self, epoch, logs=None):
        if self._training:
            self._guarded(self._epoch_end, epoch, logs)

    def _epoch_end(self, epoch, logs):
        self._first_batch_values()
        self._step = step = self._read_step()
        if getattr(self, "_describe_again", False) and self.model.built:
            self._describe_again = False
            description = runinfo.model_description(self.model)
            if description is not None:
                self._pending.setdefault(step, []).append(text_value(tags.CONFIG_MODEL, description))
        epoch = max(int(epoch), self._next_epoch)  # fits of one model continue one history
        self._next_epoch = epoch + 1
        if self._watch is not None:
            self._watch.end_epoch(epoch)  # its records join this step's values
        epoch_values = runinfo.epoch_values(epoch, logs, getattr(self.model, "optimizer", None))
        self._metric_tags.update(tag for tag in epoch_values if tags.is_metric(tag))
        values = [scalar_value(tag, value) for tag, value in epoch_values.items()]
        values.extend(self._speed.scalars(step))
        values.extend(self._guard_counters())
        pictures = []
        if self.keras.epoch_histograms(epoch):  # Keras's histogram_freq: weights at epoch ends
            histograms, pictures = weight_values(self.model, images=self.keras.write_images)
            values.extend(histograms)
        self._pending.setdefault(step, []).extend(values)
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

    # -- records of the instrumented step ------------------------------------------------
    def _on_record(self, record) -> None:
        """A recording step ended (called by the instrumented step, not by Keras)."""
        if self._training:
            self._guarded(self._record, record)

    def _record(self, record) -> None:
        self._records = getattr(self, "_records", 0) + 1
        if self._records == self.dense_steps and self._inst is not None:
            self._listen(False)  # the first steps were observed one by one: back to the schedule
            self._listen(True)
        self._first_batch_values()
        self._step = step = record.step
        step_values = runinfo.step_values(record, getattr(self.model, "optimizer", None))
        values = [scalar_value(tag, value) for tag, value in step_values.items()]
        if record.scalars and record.moved:
            values.extend(self._speed.scalars(step))
        values.extend(histogram_value(tag, buckets) for tag, buckets in record.histograms.items())
        if values:
            self._pending.setdefault(step, []).extend(values)
        self._emit()

    def _first_batch_values(self) -> None:
        """Queues the sample images and the lint of the first batch, at the step it trained as."""
        step = self._first_step
        if self._first_images is not None:
            images, self._first_images = self._first_images, None
            if self.active:
                self._images_written = self._writer.image(
                    step, tags.IMAGES_INPUTS, images, max_outputs=len(images)
                )
        if self._first_lint is not None:
            text, self._first_lint = self._first_lint, None
            self._pending.setdefault(step, []).append(text_value(tags.CONFIG_LINT, text))
            self._lint_written = True

    def _on_guard_event(self, event) -> None:
        if not (self._training and self.active):
            return
        values = [text_value(tags.GUARD_EVENTS, guard_event_line(event)),
                  text_value(tags.GUARD_RECORDS, guard_event_json(event)), *self._guard_counters()]
        self._pending.setdefault(int(event.step), []).extend(values)
        self._emit()

    def _begin_invariants(self) -> None:
        """Listens to the model's invariant checks (one watch per model, shared with LiveDiagnosis)."""
        if not self.invariants:
            return
        self._watch = invariant_watch(self.model, step=self._read_step)
        self._watch.add_listener(self._on_invariant)
        self._watch.begin_fit(self._next_epoch)

    def _on_invariant(self, record: dict) -> None:
        if self._training and self.active:
            text = text_value(tags.INVARIANT_RECORDS, json.dumps(strict_json(record)))
            self._pending.setdefault(int(record["step"]), []).append(text)

    def _guard_counters(self) -> list:
        inst = self._inst
        if inst is None or inst.guard is None:
            return []
        violations, skipped = self._guard_offsets
        return [
            scalar_value(tags.GUARD_VIOLATIONS, inst.violations + violations),
            scalar_value(tags.GUARD_SKIPPED, inst.skipped + skipped),
        ]

    def _peek_first_batch(self, data) -> None:
        """Keeps what the first batch shows: sample images and the static lint of the batch."""
        want_images, want_lint = self._peek_wants
        count = (DEFAULT_IMAGES if self.images is None else int(self.images)) if want_images else 0
        self._first_lint, self._first_images = peek_first_batch(
            self.model, data, images=count, lint=want_lint, extra_lint=self.pipeline_lint)

    # -- helpers -------------------------------------------------------------------
    def _read_step(self) -> int:
        return self._inst.global_step() if self._inst is not None else model_step(self.model)

    def _mark_speed(self) -> None:
        """Steps per second count from here: after the fit's first steps (their traces compiled)."""
        self._speed.mark(self._read_step())

    def _emit(self) -> None:
        pending, self._pending = self._pending, {}
        if not self.active:
            return
        if pending:
            self._written_step = max(self._written_step, *pending)
        for step in sorted(pending):
            self._writer.write(step, pending[step])

    def _start_session(self) -> None:
        """Writes `SessionLog.START`; on a resume, takes the guard counters on from the disk.

        The START is at the first step this session trains (the values at
        `_step` are the restored state's). TensorBoard takes every START after
        a run's first for a restart and drops what earlier sessions wrote at
        that step and after: what a killed run wrote after its last checkpoint.
        """
        directory = self.run_path or (None if self.run_subdir else self.logdir)
        start = self._step + 1
        if not self._writer.write_event(session_start_event(start)) or not resumed(directory, self._step):
            return
        inst = self._inst
        if inst is None or inst.guard is None:
            return
        self._guard_offsets = guard_offsets(directory, start, inst.violations, inst.skipped)

    def _write_config(self) -> None:
        step = self._step
        inst = self._inst
        config = runinfo.run_config(
            self.model,
            self.params,
            guard=inst.guard.policy if inst is not None and inst.guard is not None else "off",
            scalars_every=self.scalars_every,
            histograms_every=self.histograms_every if self.histogram_kinds else 0,
        )
        values = [text_value(tags.CONFIG_HPARAMS, hparams_module.hparams_markdown(self.hparams, config))]
        description = runinfo.model_description(self.model)
        if description is not None:
            values.append(text_value(tags.CONFIG_MODEL, description))
        # a subclassed model is built by its first step: describe it again then, when what it
        # does with its inputs (ids or numbers) could not be read before
        self._describe_again = description is not None and not self.model.built
        self._config_text_written = self._writer.write(step, values)
        if self.hparams and not self._session_started:
            self._session_started = self._writer.write_summary(
                0, hparams_module.session_start_summary(self.hparams)
            )

    def _write_experiment(self) -> None:
        if not self.hparams or not self.active:
            return
        metrics = self._metric_tags or {tags.train("loss")}
        summary = hparams_module.config_summary(self.hparams, metrics, self.hparam_domains)
        self._config_written = self._writer.write_summary(0, summary)

    def _write_embeddings(self) -> None:
        source, samples = self.embeddings[0], self.embeddings[1]
        labels = self.embeddings[2] if len(self.embeddings) == 3 else None
        vectors, name = compute_embeddings(self.model, source, samples)
        metadata = None if labels is None else [str(v) for v in np.asarray(labels).reshape(-1)]
        try:
            write_projector(self.run_path, vectors, metadata, name=name)
        except WRITE_ERRORS as error:
            self._writer.report_failure(error, "write the projector files")

    def _write_tables(self) -> None:
        """Every Embedding table of the model to the projector (what Keras's embeddings_freq promises)."""
        if not self.run_path:
            return
        try:
            write_embedding_tables(self.run_path, self.model, self.keras.embeddings_metadata)
        except WRITE_ERRORS as error:
            self._writer.report_failure(error, "write the projector files")
        except ContractError:  # a table the projector cannot show (empty): nothing to show
            pass

    # -- ending ------------------------------------------------------------------------
    def _guarded(self, fn, *args):
        """Runs a hook; if it raises (strict logging, a bad option), closes the run first."""
        try:
            return fn(*args)
        except BaseException as error:
            if self._failure is None:
                self._failure = failure_record(error, self.model, step=self._step)
            self._finish("failure", quiet=True)
            raise

    def _finish(self, status: str, *, quiet: bool = False, reason: str | None = None) -> None:
        """Ends the run: pending values, the end-of-training record (`run/status`), the session end.

        Every ending writes `run/status`: a failure's record, or `end_record`
        (completed, or aborted by a signal or an exit). A log that lacks it
        was cut off (SIGKILL) and is diagnosed "interrupted".
        """
        if self._finished:
            return
        self._finished = True
        self._training = False
        try:
            if self.active:
                self._first_batch_values()
                self._emit()
                if status == "success" and self.embeddings is not None and self.run_path:
                    self._write_embeddings()
                if status == "success" and self.run_path:
                    self._write_tables()
                if not self._config_written:
                    self._write_experiment()
                step = max(self._step, self._written_step)
                record = self._failure or end_record(status, step, reason)
                self._writer.write(step, [text_value(tags.RUN_STATUS, json.dumps(
                    strict_json(record)))])
                if self._session_started:
                    self._writer.write_summary(0, hparams_module.session_end_summary(status, time.time()))
        except SummaryWriteError:
            if not quiet:
                raise
        finally:
            self._listen(False)
            if self._watch is not None:
                self._watch.remove_listener(self._on_invariant)
            if self._profiler is not None:
                self._profiler.stop()
            for hook in self._signal_hooks:
                hook.restore()
            lifecycle.unwrap_train_function(self.model, self._wrapper)
            self._wrapper = None
            lifecycle.unregister_open(self)
            try:
                self._writer.close()
            except SummaryWriteError:
                if not quiet:
                    raise

    def _on_step_error(self, error: BaseException) -> None:
        status = "aborted" if isinstance(error, KeyboardInterrupt) else "failure"
        inst = self._inst
        self._failure = failure_record(
            error, self.model, step=inst.host_step if inst is not None else self._step,
            batch_size=getattr(inst, "last_batch_size", None))
        self._finish(status, quiet=True)

    def _on_signal(self, final: bool, reason: str | None = None) -> None:
        if final:
            self._finish("aborted", quiet=True, reason=reason)
        else:
            self._emit()
            self._writer.flush()

    def _close_at_exit(self) -> None:
        self._finish("aborted", quiet=True, reason="the interpreter exited during training")

    # -- explicit control ----------------------------------------------------------------
    def flush(self) -> None:
        """Writes what is pending and flushes the event file."""
        self._emit()
        self._writer.flush()

    def close(self) -> None:
        """Ends the run now (as aborted if training is still going) and closes the event file."""
        if not self._finished:
            self._finish("aborted")
        else:
            self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._finished:
            self._finish("failure" if exc_type is not None else "aborted", quiet=exc_type is not None)
        self._writer.close()
        return False


__all__ = ["HISTOGRAM_KINDS", "Logger"]
