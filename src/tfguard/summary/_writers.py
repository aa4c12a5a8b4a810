"""One lazily created event-file writer per run, and the summary values it writes.

`RunWriter` owns a `tf.summary.create_file_writer` for one run directory. It
is created on the first write (the directory comes from a factory, so a run
that logs nothing leaves nothing behind) and writes a whole step at once: the
values of one step go into one `Summary` proto and one raw-summary op, so
fifty scalars cost one TensorFlow op instead of fifty, and nothing is
flushed before `max_queue` events or `flush_millis` (or an explicit flush:
every epoch end, the end of training, a signal). The values carry
the same plugin metadata `tf.summary.scalar/histogram/text` write
(`tfguard.summary._summary_values`), so TensorBoard, `tfguard.events` and
any other reader see ordinary summaries.
A scalar given as a `(tag, number)` pair is its tag's serialized frame
around its 4 bytes (`scalar_frame`, made once per tag), and carries its
metadata the first time its event file holds its tag: readers take a
series' kind from its first value with metadata, and a deep model's
thousand scalars a step cost a join, not a thousand proto values.

Training does not wait for its logs: `write_later` hands a step's values
to the writer's own thread, which builds the protos and writes them while
the next steps run (TensorFlow releases the GIL while a step executes;
the thread's Python still takes the GIL in turns with the training
thread's, so its work has to stay small). Every
other call (`write`, `flush`, `close`, ...) first writes what was handed
over, on the caller's thread, so events keep their order and a flush or a
close loses nothing. A strict writer writes at once: its failure stops
training at the step that failed.

A log directory that is read-only or full must not cost a training run:
every write is guarded. On the first failure the writer warns once
(`SummaryWarning`) and stops writing, or, with `strict=True`, raises
`tfguard._errors.SummaryWriteError`.

Example:

>>> import tempfile
>>> from tfguard.summary._summary_values import text_value
>>> writer = RunWriter(tempfile.mkdtemp)
>>> writer.write(1, [("train/loss", 0.5), text_value("config/hparams", "| a | 1 |")])
True
>>> writer.close()
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import re
import threading
import warnings
from collections.abc import Callable, Iterable

import tensorflow as tf
from tensorboard.compat.proto import event_pb2, summary_pb2

from tfguard._errors import SummaryWriteError
from tfguard._hooks import tf_compat
from tfguard.summary._summary_values import float32_bytes, scalar_frame

DEFAULT_MAX_QUEUE = 10
"""Events (one per logged step) buffered before a write to disk. TensorFlow's default."""
DEFAULT_FLUSH_MILLIS = 10_000
"""A write more than this many milliseconds after the last flush flushes (TF: 120000)."""
DEFAULT_FILENAME_SUFFIX = ".v2"
"""Suffix of the event file names. TensorFlow's default."""

_REASON_NOISE = re.compile(r"\{\{function_node [^}]*\}\}")

# What a full or read-only disk looks like from TensorFlow and from Python.
WRITE_ERRORS = (tf.errors.OpError, OSError)


class SummaryWarning(UserWarning):
    """Logging stopped (read-only or full log directory); training goes on."""


def _after_pending(method):
    """`method` on the caller's thread, after the values handed to `write_later` (written first, in order)."""

    @functools.wraps(method)
    def in_order(self, *args, **kwargs):
        with self._lock:
            self._write_pending()
            self._warn_from_thread()
            error, self._thread_error = self._thread_error, None
            try:
                return method(self, *args, **kwargs)  # a close still closes, a run's status is still written
            finally:
                if error is not None:  # what the writer's thread raised, raised here
                    raise error

    return in_order


class RunWriter:
    """The event-file writer of one run, created on first use.

    Example:

    >>> import tempfile
    >>> writer = RunWriter(tempfile.mkdtemp, max_queue=5)
    >>> writer.path is None, writer.write(3, [("a", 1.0)]), writer.path is not None
    (True, True, True)
    >>> writer.close()

    Args:
        directory: the run directory, or a function returning it (called once,
            on the first write; it may create the directory).
        max_queue: events buffered before writing. Defaults to `10`.
        flush_millis: a write this long after the last flush flushes. Defaults to `10000`.
        filename_suffix: event file name suffix. Defaults to `".v2"`.
        strict: raise `SummaryWriteError` on a failed write instead of
            warning once and going on without logs. Defaults to `False`.
    """

    def __init__(
        self,
        directory: str | os.PathLike | Callable[[], str],
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
        flush_millis: int = DEFAULT_FLUSH_MILLIS,
        filename_suffix: str = DEFAULT_FILENAME_SUFFIX,
        strict: bool = False,
    ):
        self._directory = directory
        self.max_queue = int(max_queue)
        self.flush_millis = int(flush_millis)
        self.filename_suffix = str(filename_suffix)
        self.strict = bool(strict)
        self.path: str | None = None
        self.failed: BaseException | None = None
        self._writer = None
        self._described: set[str] = set()  # scalar tags whose metadata the open event file holds
        self._frames: dict[tuple[str, bool], tuple[bytes, bytes]] = {}  # (tag, described) -> `scalar_frame`
        self._pending: collections.deque = collections.deque()  # (step, values) handed to `write_later`
        self._lock = threading.RLock()  # one thread writes at a time: the caller's or the writer's own
        self._thread: threading.Thread | None = None  # the writer's thread, while it has values to write
        self._thread_lock = threading.RLock()  # guards `_thread` against its exit (a signal handler may re-enter)
        self._thread_error: BaseException | None = None  # what the writer's thread raised, raised by the next call
        self._thread_warning: str | None = None  # the writer's thread's failure, warned on the caller's thread
        self._writing_pending = False  # `_write_pending` runs: a signal handler's flush leaves the rest to it

    # -- life cycle --------------------------------------------------------------
    @property
    def active(self) -> bool:
        """`False` once a write failed (nothing more is written)."""
        return self.failed is None

    def _open(self) -> bool:
        if self.failed is not None:
            return False
        if self._writer is not None:
            return True
        try:
            if self.path is None:
                directory = self._directory
                self.path = os.fspath(directory() if callable(directory) else directory)
            self._writer = tf.summary.create_file_writer(
                self.path,
                max_queue=self.max_queue,
                flush_millis=self.flush_millis,
                filename_suffix=self.filename_suffix,
            )
            self._described = set()  # a new event file
        except WRITE_ERRORS as error:
            self._report_failure(error, "create the event file")
            return False
        return True

    @_after_pending
    def flush(self) -> None:
        """Writes buffered events to disk (no-op before the first write)."""
        if self._writer is None or self.failed is not None:
            return
        try:
            self._writer.flush()
        except WRITE_ERRORS as error:
            self._report_failure(error, "flush")

    @_after_pending
    def close(self) -> None:
        """Flushes and closes the event file; a later write opens a new one in the same run."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            writer.close()
        except WRITE_ERRORS as error:
            if self.failed is None:
                self._report_failure(error, "close")

    # -- writing -----------------------------------------------------------------
    @_after_pending
    def write(self, step: int, values: Iterable) -> bool:
        """Writes summary values (`Summary.Value`s, or `(tag, number)` scalars) as one event at `step`.

        Returns:
            `True` if written (buffered), `False` when logging stopped.

        Raises:
            SummaryWriteError: on a failed write with `strict=True`.
        """
        return self._write(step, values)

    def write_later(self, step: int, values: Iterable) -> bool:
        """Hands `values` (as `write` takes them) to the writer's thread, to be written as one event at `step`.

        `values` may be a generator: it runs in the writer's thread. A strict
        writer writes at once (see `write`).

        Example:

        >>> import tempfile
        >>> from tfguard.events import read_run
        >>> writer = RunWriter(tempfile.mkdtemp())
        >>> writer.write_later(2, [("train/loss", 0.5)]), writer.write(3, [("train/loss", 0.25)])
        (True, True)
        >>> writer.close()
        >>> steps, _, values = read_run(writer.path).scalars["train/loss"]
        >>> steps.tolist(), values.tolist()
        ([2, 3], [0.5, 0.25])

        Returns:
            `False` when logging stopped, else `True`.
        """
        self._warn_from_thread()
        if self.strict:
            return self.write(step, values)
        if self.failed is not None:
            return False
        self._pending.append((int(step), values))
        with self._thread_lock:
            if self._thread is not None:
                return True
            self._thread = threading.Thread(target=self._write_in_background, daemon=True,
                                            name="tfguard-summary-writer")
            try:
                self._thread.start()
                return True
            except RuntimeError:  # no thread to be had (at the interpreter's exit, out of threads)
                self._thread = None
        with self._lock:  # written now, on the caller's thread
            self._write_pending()
        return self.active

    def _write_in_background(self) -> None:
        """The writer's thread: writes what was handed over until nothing is left, then ends."""
        while True:
            with self._thread_lock:
                if not self._pending:
                    self._thread = None
                    return
            with self._lock:
                try:
                    self._write_pending()
                except BaseException as error:  # raised on the caller's thread by its next call
                    if self._thread_error is None:
                        self._thread_error = error

    def _write_pending(self) -> None:
        """Writes the values handed to `write_later`, oldest first (the caller holds `_lock`).

        A signal handler that flushes while this runs on the same thread
        (the lock is re-entrant) leaves the rest to it: the step it popped is
        written before the ones after it.
        """
        if self._writing_pending:
            return
        self._writing_pending = True
        try:
            while self._pending:
                step, values = self._pending.popleft()
                self._write(step, values)
        finally:
            self._writing_pending = False

    def _warn_from_thread(self) -> None:
        """Warns, on the caller's thread, of a failure the writer's thread met (warning filters are
        the caller's: a warning raised in the thread while the caller ignores warnings would be lost)."""
        message, self._thread_warning = self._thread_warning, None
        if message is not None:
            warnings.warn(message, SummaryWarning, stacklevel=3)

    def _write(self, step: int, values: Iterable) -> bool:
        if self.failed is not None:  # values not made (a generator's work) once logging stopped
            return False
        values = list(values)
        if not values:
            return True
        if not self._open():
            return False
        parts = []
        for value in values:
            if isinstance(value, tuple):
                tag, number = value
                head, tail = self._scalar_frame(tag)
                parts += (head, float32_bytes(number), tail)
            else:
                parts.append(summary_pb2.Summary(value=[value]).SerializeToString())
        return self._write_serialized(step, b"".join(parts))  # one Summary: its values, one after another

    def _scalar_frame(self, tag: str) -> tuple[bytes, bytes]:
        """The serialized one-value `Summary` of scalar `tag` before and after its 4 bytes; its metadata only
        where the event file first holds `tag` (`scalar_frame`, made once per tag)."""
        described = tag in self._described
        if not described:
            self._described.add(tag)
        frame = self._frames.get((tag, described))
        if frame is None:
            frame = self._frames[(tag, described)] = scalar_frame(tag, described)
        return frame

    @_after_pending
    def write_summary(self, step: int, summary: summary_pb2.Summary) -> bool:
        """Writes one `Summary` proto at `step` (see `write`)."""
        return self._write_summary(step, summary)

    def _write_summary(self, step: int, summary: summary_pb2.Summary) -> bool:
        return self._write_serialized(step, summary.SerializeToString())

    def _write_serialized(self, step: int, serialized: bytes) -> bool:
        if not self._open():
            return False
        try:
            tf_compat.write_raw_summary(self._writer, int(step), serialized)
        except WRITE_ERRORS as error:
            self._report_failure(error, "write")
            return False
        return True

    @_after_pending
    def write_event(self, event: event_pb2.Event) -> bool:
        """Writes a whole `Event` proto as it is (e.g. `session_start_event`); see `write`."""
        if not self._open():
            return False
        serialized = event.SerializeToString()
        try:
            tf_compat.write_event(self._writer, serialized)
        except WRITE_ERRORS as error:
            self._report_failure(error, "write")
            return False
        return True

    @_after_pending
    def image(self, step: int, tag: str, images, max_outputs: int = 3) -> bool:
        """Writes a batch of images `[n, h, w, c]` in `[0, 1]` as PNG (`tf.summary.image`)."""
        if not self._open():
            return False
        try:
            with self._writer.as_default():
                tf.summary.image(tag, images, step=int(step), max_outputs=int(max_outputs))
        except WRITE_ERRORS as error:
            self._report_failure(error, "write")
            return False
        return True

    @_after_pending
    def report_failure(self, error: BaseException, action: str) -> None:
        """Stops this run's logging after a failed write: warns once, or raises when strict.

        The writer calls it for its own writes; whoever writes a file of the
        run beside the event file (the projector's config and tables) calls
        it too, so that failure is reported, and ends the logging, alike.
        The message names the run directory, the action and the reason.

        Example:

        >>> import tempfile, warnings
        >>> writer = RunWriter(tempfile.mkdtemp())
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     writer.report_failure(OSError(28, "No space left on device"), "write the projector files")
        >>> writer.active, "Could not write the projector files" in str(caught[0].message)
        (False, True)

        Args:
            error: the exception the write raised.
            action: what was being done, completing "Could not ... TensorBoard
                logs", e.g. `"write the projector files"`.

        Raises:
            SummaryWriteError: with `strict=True` (from `error`).
        """
        self._report_failure(error, action)

    def _report_failure(self, error: BaseException, action: str) -> None:
        self.failed = error
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(WRITE_ERRORS):
                writer.close()
        # name the directory: the run's, else the one the failing call was making
        directory = None if callable(self._directory) else self._directory
        where = self.path or getattr(error, "filename", None) or directory
        where = repr(os.fspath(where)) if where else "the log directory (its path is unknown)"
        reason = _REASON_NOISE.sub("", getattr(error, "message", None) or str(error)).strip()
        reason = " ".join(reason.split())[:400] or type(error).__name__
        message = (
            f"Could not {action} TensorBoard logs in {where}: {type(error).__name__}: {reason}. "
            "Expected a writable log directory with free space."
        )
        if self.strict:
            raise SummaryWriteError(
                message + " Logging is strict (strict=True), so training stops here.",
                hint="free disk space or choose a writable logdir; or pass strict=False to keep "
                "training without logs",
            ) from error
        message += " Training goes on without TensorBoard logs (pass strict=True to stop instead)."
        if threading.current_thread() is self._thread:
            self._thread_warning = message  # warned by the caller's next call (`_warn_from_thread`)
            return
        warnings.warn(message, SummaryWarning, stacklevel=3)


__all__ = [
    "DEFAULT_FILENAME_SUFFIX",
    "DEFAULT_FLUSH_MILLIS",
    "DEFAULT_MAX_QUEUE",
    "WRITE_ERRORS",
    "RunWriter",
    "SummaryWarning",
]
