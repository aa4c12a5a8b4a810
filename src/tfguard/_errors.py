"""Typed exceptions raised by tfguard.

Every error names what was wrong (tensor, layer, variable, step, file, offset),
what was expected, and a fix. The library never prints or exits; the CLI maps
these exceptions to one red `ERROR` line plus a hint and an exit code.

Example:

>>> from tfguard._errors import GuardViolation
>>> err = GuardViolation("loss at step 3 is NaN", stage="loss", step=3)
>>> err.stage, err.step
('loss', 3)
"""

from __future__ import annotations


class TfguardError(Exception):
    """Base class of every error tfguard raises on purpose.

    Args:
        message: what was wrong, what was expected, and the received value.
        hint: the fix to try. Defaults to `None`.
    """

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}\nTry: {hint}")


class GuardViolation(TfguardError):
    """A check of the quality firewall failed.

    Args:
        message: the full description of the violation.
        stage: one of `"data"`, `"forward"`, `"loss"`, `"gradients"`,
            or `"check"` for a direct check. Defaults to `"check"`.
        where: the tensor, layer or variable that failed. Defaults to `None`.
        step: the global training step, when known. Defaults to `None`.
        batch: the 0-based index of the bad batch among all batches the
            model trained on, when known. Defaults to `None`.
        epoch: the 0-based epoch of `fit`, when known. Defaults to `None`.
        counts: the numbers behind it, e.g. `{"nan": 3, "posinf": 0}`.
            Defaults to `None`.
        quarantine: the folder holding the saved batch. Defaults to `None`.
        hint: the fix to try. Defaults to `None`.
    """

    exit_code = 3

    def __init__(
        self,
        message: str,
        *,
        stage: str = "check",
        where: str | None = None,
        step: int | None = None,
        counts: dict | None = None,
        quarantine: str | None = None,
        hint: str | None = None,
        batch: int | None = None,
        epoch: int | None = None,
    ):
        self.stage = stage
        self.batch = batch
        self.epoch = epoch
        self.where = where
        self.step = step
        self.counts = dict(counts or {})
        self.quarantine = quarantine
        super().__init__(message, hint=hint)


class ContractError(TfguardError, ValueError):
    """A contract, check, option or argument was given wrongly (not a data problem).

    Also a `ValueError`, as Keras raises for a wrong argument, so code that
    catches Keras's errors catches tfguard's.
    """

    exit_code = 2


class QuarantineError(TfguardError):
    """A quarantine folder is missing, incomplete or cannot be replayed."""

    exit_code = 2


class EventFileError(TfguardError):
    """An event file or log directory cannot be read at all."""

    exit_code = 2


class ExportError(TfguardError):
    """An export or a parity check failed."""

    exit_code = 4


class DataError(TfguardError):
    """A dataset could not be found or loaded."""

    exit_code = 2


class MissingExtraError(TfguardError, ImportError):
    """An optional package a command needs is not installed; the hint names the extra that brings it.

    Also an `ImportError`, so code that guards an optional import catches it.

    Args:
        message: what needs the package, which package, and where it was looked for.
        extra: the tfguard extra that installs it (`pip install 'tfguard[road]'`).
        package: the distribution to install (`scikit-learn`).
        hint: the fix to try. Defaults to `None`.
    """

    exit_code = 2

    def __init__(self, message: str, *, extra: str, package: str, hint: str | None = None):
        self.extra = extra
        self.package = package
        super().__init__(message, hint=hint)


class SummaryWriteError(TfguardError):
    """TensorBoard logs could not be written (read-only or full log directory).

    Raised only by a `tfguard.Logger(strict=True)`; without `strict`, the
    logger warns once and training goes on without logs.
    """

    exit_code = 2


class WorkerLostError(TfguardError):
    """A peer worker of a multi-worker run was lost (crashed, killed, preempted or hung).

    Raised on a survivor by `tfguard._distribute.multiworker.lost_workers`
    instead of TensorFlow's raw `UnavailableError`/`DeadlineExceededError`.
    The message names the lost worker's address; the hint says to restart
    every worker (`keras.callbacks.BackupAndRestore` resumes).

    Args:
        message: what was lost, what was expected, and the raw error.
        workers: the `host:port` of each lost worker (every peer when the
            error does not say which). Defaults to `None`.
        tasks: the same as `"<task_type>:<index>"`. Defaults to `None`.
        step: the global step the run had reached. Defaults to `None`.
        hint: the fix to try. Defaults to `None`.
    """

    exit_code = 5

    def __init__(
        self,
        message: str,
        *,
        workers: list | None = None,
        tasks: list | None = None,
        step: int | None = None,
        hint: str | None = None,
    ):
        self.workers = list(workers or [])
        self.tasks = list(tasks or [])
        self.step = step
        super().__init__(message, hint=hint)
