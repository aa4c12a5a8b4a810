"""`RunEnd`: how the Logger ends a run, in every way it can end (part of `tfguard.summary.Logger`).

Every ending writes what is pending, the projector (at a successful end),
the HParams experiment if it is still missing, and `run/status` (a
failure's record, or `end_record`: completed, or aborted by a signal or an
exit), then stops listening, restores the signal handlers, unwraps the
train function and closes the event file. A log without `run/status` was
cut off (SIGKILL) and is diagnosed "interrupted". A hook that raises
(strict logging, a bad option) closes the run first (`_guarded`); an
exception of the step closes it through the wrapped train function
(`_on_step_error`); SIGTERM and SIGINT flush, and close on the default
action (`_on_signal`); the interpreter's exit closes it (`_close_at_exit`).

Example:

>>> import json, keras, numpy as np, tempfile
>>> from tfguard.summary import Logger
>>> from tfguard.events import read_run
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> with Logger(tempfile.mkdtemp(), scalars_every=0, invariants=False) as logger:
...     _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), verbose=0, callbacks=[logger])
>>> [json.loads(text)["status"] for _, _, text in read_run(logger.run_path).texts["run/status"]]
['completed']
"""

from __future__ import annotations

import json
import time

import numpy as np

from tfguard import _tags
from tfguard._errors import ContractError, SummaryWriteError
from tfguard._findings import strict_json
from tfguard.lint._failure import end_record, failure_record
from tfguard.summary import _hparams as hparams_module
from tfguard.summary import _lifecycle
from tfguard.summary._keras_writes import write_embedding_tables
from tfguard.summary._projector import compute_embeddings, write_projector
from tfguard.summary._summary_values import text_value
from tfguard.summary._writers import WRITE_ERRORS


class RunEnd:
    """The end of a run: the last values, `run/status`, the projector, and every hook undone."""

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
                step = max(self._step, self._queue.written_step)
                record = self._failure or end_record(status, step, reason)
                self._writer.write(step, [text_value(_tags.RUN_STATUS, json.dumps(
                    strict_json(record)))])
                if self._session_started:
                    self._writer.write_summary(0, hparams_module.session_end_summary(status, time.time()))
        except SummaryWriteError:
            if not quiet:
                raise
        finally:
            self._listen(False)
            if self._profiler is not None:
                self._profiler.stop()
            for hook in self._signal_hooks:
                hook.restore()
            _lifecycle.unwrap_train_function(self.model, self._wrapper)
            self._wrapper = None
            _lifecycle.unregister_open(self)
            try:
                self._writer.close()
            except SummaryWriteError:
                if not quiet:
                    raise

    def _on_step_error(self, error: BaseException) -> None:
        status = "aborted" if isinstance(error, KeyboardInterrupt) else "failure"
        inst = self._inst
        self._failure = failure_record(
            error, self.model,
            step=inst.host_step + self.step_offset if inst is not None and inst.host_step is not None
            else self._step,
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


__all__ = ["RunEnd"]
