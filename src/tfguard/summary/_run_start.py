"""`RunStart`: what the Logger writes once, when a run starts (part of `tfguard.summary.Logger`).

At the start of each `fit` the chief opens the session (`SessionLog.START`
at the first step it trains, and on a resume the guard counters taken on
from the disk), writes the run's configuration (`config/hparams`,
`config/model`, the model's graph), the static lint (`config/lint`) and
sample images (`images/inputs`), or, when the instrumented step can show
it the first batch, keeps them for that batch (`_peek_first_batch`) and
writes them at the step it trained as. The HParams experiment is written at
the first epoch end (its metrics are known then).

Example (a run directory holds the configuration after the first epoch):

>>> import keras, numpy as np, tempfile
>>> from tfguard.summary import Logger
>>> from tfguard.events import read_run
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> logger = Logger(tempfile.mkdtemp(), {"lr": 0.01}, scalars_every=0, invariants=False)
>>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), verbose=0, callbacks=[logger])
>>> sorted(t for t in read_run(logger.run_path).texts if t.startswith("config/"))
['config/hparams', 'config/lint', 'config/model']
"""

from __future__ import annotations

import json
import os

from tfguard import _tags
from tfguard._distribute.multiworker import is_chief
from tfguard._findings import strict_json
from tfguard._hooks.installed import is_installed
from tfguard.summary import _hparams as hparams_module
from tfguard.summary import _lifecycle, _runinfo
from tfguard.summary._first_batch import peek_first_batch
from tfguard.summary._images import unit_images
from tfguard.summary._keras_writes import model_graph_values
from tfguard.summary._logger_options import DEFAULT_IMAGES
from tfguard.summary._projector import check_embedding_source
from tfguard.summary._resume import guard_offsets, resumed
from tfguard.summary._rundir import run_dir
from tfguard.summary._summary_values import session_start_event, text_value


class RunStart:
    """The start of a run: the session, the configuration, the lint and sample images of the first batch."""

    def _make_run_dir(self) -> str:
        if not self.run_subdir:
            os.makedirs(self.logdir, exist_ok=True)
            return self.logdir
        name = getattr(self.model, "name", None) or "model"
        return run_dir(self.logdir, name, self.hparams)

    def _train_begin(self):
        model = self.model
        self._listen(True)  # again after an earlier fit's end
        if not is_chief(getattr(model, "distribute_strategy", None)):
            return  # only the chief writes; the step still computes the requested signals
        self._finished = False
        self._failure = None
        self._training = True
        self._queue.clear()
        self._speed.reset()
        self._step = self._read_step()
        self._first_step = self._step + 1
        _lifecycle.register_open(self)
        for hook in self._signal_hooks:
            hook.install()
        if self.embeddings is not None:
            check_embedding_source(model, self.embeddings[0])
        # Auto mode peeks only through the instrumented step (a host loop already);
        # Keras's own train function would trace its Python-iterator path once more.
        pulls_on_host = is_installed(model.train_function)
        want_images = not self._images_written and (
            (self.images is None and pulls_on_host) or (isinstance(self.images, int) and self.images > 0)
        )
        want_lint = not self._lint_written and pulls_on_host
        self._peek_wants = (want_images, want_lint)
        self._wrapper = _lifecycle.wrap_train_function(
            model, self._on_step_error, peek=self._peek_first_batch if (want_images or want_lint) else None,
            on_warm=self._mark_speed,
            around=self._profiler.around if self._profiler is not None else None,
        )
        if not self.active:
            return
        self._guard_offsets = (0, 0)
        self._start_session()
        graph = not self._config_text_written and self.keras.write_graph
        if not self._config_text_written:
            self._write_config()
        self._begin_invariants()
        if not self._lint_written and not want_lint:
            self._lint_written = self._writer.write(
                self._step, [text_value(_tags.CONFIG_LINT,
                                        _runinfo.lint_json(model, extra=self.pipeline_lint))]
            )
        if self.images is not None and not isinstance(self.images, int) and not self._images_written:
            self._images_written = self._writer.image(
                self._step, _tags.IMAGES_INPUTS, unit_images(self.images, len(self.images)),
                max_outputs=len(self.images),
            )
        if graph:  # last: the model's JSON is made in the writer's thread, which a later write here would wait for
            self._writer.write_later(self._step, model_graph_values(model))

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
        config = _runinfo.run_config(
            self.model,
            self.params,
            guard=inst.guard.policy if inst is not None and inst.guard is not None else "off",
            scalars_every=self.scalars_every,
            histograms_every=self.histograms_every if self.histogram_kinds else 0,
            **_runinfo.phase_rows(self.phases),
        )
        values = [text_value(_tags.CONFIG_HPARAMS, hparams_module.hparams_markdown(self.hparams, config))]
        if self.phases:
            values.append(text_value(_tags.CONFIG_PHASES, json.dumps(strict_json(self.phases))))
        description = _runinfo.model_description(self.model)
        if description is not None:
            values.append(text_value(_tags.CONFIG_MODEL, description))
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
        metrics = self._metric_tags or {_tags.train("loss")}
        summary = hparams_module.config_summary(self.hparams, metrics, self.hparam_domains)
        self._config_written = self._writer.write_summary(0, summary)

    def _peek_first_batch(self, data) -> None:
        """Keeps what the first batch shows: sample images and the static lint of the batch."""
        want_images, want_lint = self._peek_wants
        count = (DEFAULT_IMAGES if self.images is None else int(self.images)) if want_images else 0
        self._first_lint, self._first_images = peek_first_batch(
            self.model, data, images=count, lint=want_lint, extra_lint=self.pipeline_lint)

    def _first_batch_values(self) -> None:
        """Queues the sample images and the lint of the first batch, at the step it trained as."""
        step = self._first_step
        if self._first_images is not None:
            images, self._first_images = self._first_images, None
            if self.active:
                self._images_written = self._writer.image(
                    step, _tags.IMAGES_INPUTS, images, max_outputs=len(images)
                )
        if self._first_lint is not None:
            text, self._first_lint = self._first_lint, None
            self._queue.add(step, [text_value(_tags.CONFIG_LINT, text)])
            self._lint_written = True


__all__ = ["RunStart"]
