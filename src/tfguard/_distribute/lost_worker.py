"""A lost worker, said plainly: the raw TensorFlow error of a dead peer as a `WorkerLostError`.

A survivor of a multi-worker run whose peer dies gets a raw TensorFlow
error (`UnavailableError: ... tasks are unhealthy (stopped sending
heartbeats)`, or a `DeadlineExceededError` from a collective timeout).
`lost_worker_error` turns it into a `tfguard._errors.WorkerLostError` that
names the lost worker's address, what was expected and the fix (`FIX`);
`lost_workers` does it around `fit`. Part of
`tfguard._distribute.multiworker`.

Example:

>>> from tfguard._distribute.cluster import WorkerInfo
>>> info = WorkerInfo("worker", 0, {"worker": ["h0:1", "h1:1"]})
>>> raw = tf.errors.UnavailableError(None, None, "The following tasks are unhealthy "
...     "(stopped sending heartbeats):\\n/job:worker/replica:0/task:1")
>>> lost = lost_worker_error(raw, info=info, step=12)
>>> lost.workers, lost.step
(['h1:1'], 12)
"""

from __future__ import annotations

import contextlib
import re

import keras
import tensorflow as tf

from tfguard._distribute.cluster import TASK_TYPES, WorkerInfo, worker_info
from tfguard._errors import WorkerLostError
from tfguard._optimizer_state import model_step

_TASK = re.compile(r"/job:(?P<job>[A-Za-z_]\w*)(?:/replica:\d+)?/task:(?P<task>\d+)")
_LOST_TYPES = (
    tf.errors.UnavailableError,
    tf.errors.DeadlineExceededError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
    tf.errors.InternalError,
)
# What a lost peer's error says. A collective or coordination error of another kind (e.g. an
# InternalError about group sizes) is a configuration problem, not a lost worker.
_LOST_SIGNS = (
    "unhealthy",
    "heartbeat",
    "timed out",
    "deadline exceeded",
    "socket closed",
    "connection reset",
    "connection refused",
    "failed to connect",
)
_WEAK_SIGNS = ("collective", "coordination")
_WEAK_TYPES = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.AbortedError)
FIX = (
    "restart every worker with the same TF_CONFIG (a collective all-reduce cannot go on with a "
    "missing peer, so the survivors stop too); with keras.callbacks.BackupAndRestore in the "
    "callbacks (one backup_dir per worker, see tfguard._distribute.multiworker.worker_dir) fit() "
    "resumes from the last backup"
)


def lost_worker_error(
    error: BaseException, strategy=None, *, step: int | None = None, info: WorkerInfo | None = None
) -> WorkerLostError | None:
    """Translates the raw error a survivor gets when a peer dies, or returns `None`.

    A dead peer reaches the survivors as an `UnavailableError` from the
    coordination service ("The following tasks are unhealthy (stopped
    sending heartbeats): /job:worker/replica:0/task:1"), as a
    `DeadlineExceededError` from a collective with
    `CommunicationOptions(timeout_seconds=...)` (a hung peer that still
    sends heartbeats), or as a cancelled/aborted collective. The lost
    task is read from the message and named by its address.

    Example:

    >>> info = WorkerInfo("worker", 0, {"worker": ["h0:1", "h1:1"]})
    >>> raw = tf.errors.UnavailableError(None, None, "Collective ops is aborted by: The following "
    ...     "tasks are unhealthy (stopped sending heartbeats):\\n/job:worker/replica:0/task:1")
    >>> lost_worker_error(raw, info=info).workers
    ['h1:1']
    >>> lost_worker_error(ValueError("x"), info=info) is None
    True

    Args:
        error: the exception `fit` raised.
        strategy: the strategy (for the cluster). Defaults to `None` (`TF_CONFIG`).
        step: the global step the run had reached, for the message. Defaults to `None`.
        info: who this process is, instead of reading it. Defaults to `None`.

    Returns:
        A `WorkerLostError` (not raised), or `None` if `error` is not a lost peer.
    """
    if not isinstance(error, _LOST_TYPES):
        return None
    text = getattr(error, "message", None) or str(error)
    lowered = text.lower()
    strong = any(sign in lowered for sign in _LOST_SIGNS)
    weak = isinstance(error, _WEAK_TYPES) and any(sign in lowered for sign in _WEAK_SIGNS)
    if not (strong or weak):
        return None
    info = info or worker_info(strategy)
    if not info.in_cluster:
        return None
    me = (info.task_type, info.task_id)
    named, seen = [], set()
    marker = lowered.find(
        "unhealthy"
    )  # "Error reported from <task A>: ... unhealthy ...: <task B>"
    for match in _TASK.finditer(text, marker if marker >= 0 else 0):
        task = (match.group("job"), int(match.group("task")))
        if task != me and task not in seen and task[0] in TASK_TYPES:
            seen.add(task)
            named.append(task)
    if named:
        lost = [
            (job, index, info.address_of(job, index) or "unknown address") for job, index in named
        ]
        who = ", ".join(f"{address} (/job:{job}/task:{index})" for job, index, address in lost)
        what = f"Lost worker {who}"
    else:
        lost = info.peers()
        who = ", ".join(f"{address} (/job:{job}/task:{index})" for job, index, address in lost)
        what = (
            f"Lost contact with peer worker {who}"
            if len(lost) == 1
            else f"Lost contact with a peer worker, one of: {who}"
        )
    first_line = _telling_line(text) or type(error).__name__
    reason = _reason(lowered)
    at = f" at step {step}" if step is not None else ""
    me_text = f"{info.address or 'this task'} (/job:{info.task_type}/task:{info.task_id})"
    message = (
        f"{what}{at}: {reason}, so the collective all-reduce of worker {me_text} cannot complete. "
        f"Expected all {info.num_workers} workers of the cluster to stay up for the whole fit(). "
        f"Received: {type(error).__name__}: {_short(first_line)}"
    )
    return WorkerLostError(
        message,
        workers=[address for _, _, address in lost],
        tasks=[f"{job}:{index}" for job, index, _ in lost],
        step=step,
        hint=FIX,
    )


_TELLING = (
    "unhealthy",
    "heartbeat",
    "timed out",
    "deadline",
    "connection",
    "socket closed",
    "aborted",
    "unavailable",
)


def _telling_line(text: str) -> str | None:
    """The line of a TensorFlow error that says what happened (not 'Graph execution error:')."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for sign in _TELLING:
        for line in lines:
            if sign in line.lower():
                return line
    return lines[0] if lines else None


def _reason(lowered: str) -> str:
    if "unhealthy" in lowered or "heartbeat" in lowered:
        return "it stopped sending heartbeats (crashed, killed or preempted)"
    if "deadline" in lowered or "timed out" in lowered or "timeout" in lowered:
        return (
            "a collective timed out waiting for it (hung, or too slow for the collective timeout)"
        )
    if "socket closed" in lowered or "connection" in lowered:
        return "its connection broke"
    return "the collective was aborted"


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextlib.contextmanager
def lost_workers(model: keras.Model | None = None, strategy=None):
    """Raises `WorkerLostError` instead of the raw TensorFlow error when a peer dies.

    Wrap `fit` with it on every worker. Anything else passes through
    unchanged. The survivor's process should then exit (its collectives are
    aborted for good); restart all workers, and `BackupAndRestore` resumes.

    Example:

    >>> with lost_workers():  # an error that is not about a lost peer passes unchanged
    ...     raise ValueError("not about a peer")
    Traceback (most recent call last):
    ...
    ValueError: not about a peer

    What a lost peer becomes is shown by `lost_worker_error`.

    Args:
        model: the model, to name the step reached in the message. Defaults to `None`.
        strategy: the strategy; `None` takes the model's, else `TF_CONFIG`.
            Defaults to `None`.

    Raises:
        WorkerLostError: a peer worker was lost (the raw error is its `__cause__`).
    """
    if strategy is None and model is not None:
        strategy = model.distribute_strategy
    try:
        yield
    except _LOST_TYPES as error:
        lost = lost_worker_error(error, strategy, step=_step_of(model))
        if lost is None:
            raise
        raise lost from error


COMPLETED_STEP = "_tfguard_completed_step"
"""A model attribute: a function giving the global step of the last completed step, if known.

tfguard's instrumentation sets it: a step cut short by a lost peer may
already have moved the optimizer's `iterations` on this worker.
"""


def _step_of(model) -> int | None:
    completed = getattr(model, COMPLETED_STEP, None)
    if completed is not None and completed() is not None:
        return int(completed())
    try:
        return model_step(model, default=None)
    except Exception:  # the step is a courtesy in the message; the error stands without it
        return None


__all__ = ["COMPLETED_STEP", "FIX", "lost_worker_error", "lost_workers"]
