"""Multi-worker training: TF_CONFIG, the chief, per-worker folders, a lost worker.

A guarded model trains under `tf.distribute.MultiWorkerMirroredStrategy`
(MWMS) the same way it trains on one machine: every worker runs the same
program with its own `TF_CONFIG`, the guarded step all-reduces its failure
flags and counts, so every worker decides the same skip and reports the
same violation (with the counts of all workers), and the weights stay
identical. This module holds the few things a multi-worker run needs on
top of that:

* `tf_config` builds the `TF_CONFIG` of one task; `worker_info` and
  `is_chief` read back who this process is (the chief logs, the others do
  not);
* `worker_dir` gives each worker its own folder under a shared root, for
  quarantined batches and `keras.callbacks.BackupAndRestore` (Keras 3's
  callback is not multi-worker aware: two workers saving into one folder
  overwrite each other's files);
* `enable_multi_worker` (from `keras_20585`, the workaround kept apart so
  it can be deleted when Keras fixes keras-team/keras#20585) makes Keras
  3's `fit`/`evaluate` run under MWMS at all;
* `lost_workers` turns the raw TensorFlow error a survivor gets when a
  peer dies (`UnavailableError: ... tasks are unhealthy (stopped sending
  heartbeats)`, or a `DeadlineExceededError` from a collective timeout)
  into a `tfguard.errors.WorkerLostError` that names the lost worker's
  address, what was expected and the fix.

Example:

>>> import json
>>> config = json.loads(tf_config(["127.0.0.1:2222", "127.0.0.1:2223"], 1))
>>> config["task"]
{'type': 'worker', 'index': 1}
>>> worker_info(environ={"TF_CONFIG": tf_config(["a:1", "b:2"], 0)}).is_chief
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from collections.abc import Mapping, Sequence

import keras
import tensorflow as tf

from tfguard.distribute.keras_20585 import enable_multi_worker
from tfguard.errors import ContractError, WorkerLostError
from tfguard.optimizer_state import model_step

TASK_TYPES = ("chief", "worker")
"""The task types that train (MWMS has no parameter servers)."""

_ADDRESS = re.compile(r"^[^\s:/]+:\d{1,5}$")
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
    "callbacks (one backup_dir per worker, see tfguard.distribute.multiworker.worker_dir) fit() "
    "resumes from the last backup"
)


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """Who this process is in a multi-worker cluster.

    Example:

    >>> info = WorkerInfo("worker", 1, {"worker": ["h0:1", "h1:1"]})
    >>> info.address, info.is_chief, info.name, info.num_workers
    ('h1:1', False, 'worker-1', 2)

    Args:
        task_type: `"chief"` or `"worker"`; `None` outside a cluster.
        task_id: the index of this task in its job. Defaults to `0`.
        cluster: job name -> list of `host:port` addresses. Defaults to `{}`.
    """

    task_type: str | None
    task_id: int = 0
    cluster: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)

    @property
    def in_cluster(self) -> bool:
        """`True` when there is more than one training task."""
        return self.num_workers > 1

    @property
    def num_workers(self) -> int:
        """How many tasks train (chief and workers)."""
        return sum(len(self.cluster.get(job, ())) for job in TASK_TYPES) or 1

    @property
    def is_chief(self) -> bool:
        """The task that writes logs and exports: the chief, else worker 0."""
        if not self.in_cluster or self.task_type is None:
            return True
        if self.cluster.get("chief"):
            return self.task_type == "chief"
        return self.task_type == "worker" and self.task_id == 0

    @property
    def name(self) -> str:
        """`<task_type>-<task_id>`, e.g. `worker-1` (a folder name)."""
        return f"{self.task_type or 'worker'}-{self.task_id}"

    @property
    def address(self) -> str | None:
        """This task's `host:port`, if known."""
        return self.address_of(self.task_type, self.task_id)

    def address_of(self, task_type: str | None, task_id: int) -> str | None:
        """The `host:port` of a task, or `None` when the cluster does not list it."""
        addresses = list(self.cluster.get(task_type or "", ()))
        return addresses[task_id] if 0 <= task_id < len(addresses) else None

    def peers(self) -> list[tuple[str, int, str]]:
        """Every other training task as `(task_type, task_id, address)`."""
        return [
            (job, index, address)
            for job in TASK_TYPES
            for index, address in enumerate(self.cluster.get(job, ()))
            if (job, index) != (self.task_type, self.task_id)
        ]


def tf_config(
    workers: Sequence[str], index: int, *, task_type: str = "worker", chief: str | None = None
) -> str:
    """Builds the `TF_CONFIG` JSON of one task of a multi-worker cluster.

    Every process of the cluster gets the same `cluster` and its own `task`;
    MWMS reads it from the environment variable `TF_CONFIG` when the
    strategy is created.

    Example:

    >>> json.loads(tf_config(["10.0.0.1:2222", "10.0.0.2:2222"], 0))["cluster"]
    {'worker': ['10.0.0.1:2222', '10.0.0.2:2222']}

    Args:
        workers: the `host:port` of every worker, in task order.
        index: this task's index in its job.
        task_type: `"worker"` or `"chief"`. Defaults to `"worker"`.
        chief: the `host:port` of a separate chief task, if any. Defaults to `None`.

    Returns:
        The JSON text for `os.environ["TF_CONFIG"]`.

    Raises:
        ContractError: for an address that is not `host:port`, an unknown
            task type, or an index outside the job.
    """
    addresses = list(workers) + ([chief] if chief else [])
    for address in addresses:
        if not isinstance(address, str) or not _ADDRESS.match(address):
            raise ContractError(
                "Received an invalid value for `workers`, expected 'host:port' addresses. "
                f"Received: {address!r}"
            )
    if task_type not in TASK_TYPES:
        raise ContractError(
            f"Received an invalid value for `task_type`, expected one of {TASK_TYPES}. "
            f"Received: task_type={task_type!r}"
        )
    size = 1 if task_type == "chief" else len(workers)
    if task_type == "chief" and not chief:
        raise ContractError("Received task_type='chief' without a `chief` address, expected both.")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < size:
        raise ContractError(
            f"Received an invalid value for `index`, expected an integer in [0, {size}). "
            f"Received: index={index!r}"
        )
    cluster = {"worker": list(workers)}
    if chief:
        cluster["chief"] = [chief]
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})


def worker_info(strategy=None, *, environ: Mapping[str, str] | None = None) -> WorkerInfo:
    """Returns who this process is: from the strategy's cluster, else from `TF_CONFIG`.

    Example:

    >>> worker_info(environ={}).is_chief  # one process: it is its own chief
    True

    Args:
        strategy: a `tf.distribute` strategy (its `cluster_resolver` is read
            when it has one); `None` reads `TF_CONFIG`. Defaults to `None`.
        environ: the environment to read `TF_CONFIG` from. Defaults to `os.environ`.

    Returns:
        A `WorkerInfo`.

    Raises:
        ContractError: if `TF_CONFIG` is not valid JSON.
    """
    resolver = getattr(strategy, "cluster_resolver", None) if strategy is not None else None
    if resolver is not None and getattr(resolver, "task_type", None):
        cluster = resolver.cluster_spec().as_dict()
        return WorkerInfo(resolver.task_type, int(resolver.task_id or 0), _as_lists(cluster))
    text = (os.environ if environ is None else environ).get("TF_CONFIG", "")
    if not text.strip():
        return WorkerInfo(None, 0, {})
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ContractError(
            f"Received an invalid TF_CONFIG, expected JSON with 'cluster' and 'task'. Received: {text[:200]!r}",
            hint="build it with tfguard.distribute.multiworker.tf_config(workers, index)",
        ) from error
    task = config.get("task") or {}
    return WorkerInfo(
        task.get("type"), int(task.get("index", 0)), _as_lists(config.get("cluster") or {})
    )


def _as_lists(cluster: Mapping) -> dict[str, list[str]]:
    out = {}
    for job, tasks in cluster.items():
        if isinstance(tasks, Mapping):  # a sparse job: {index: address}
            tasks = [tasks[k] for k in sorted(tasks, key=int)]
        out[str(job)] = [str(t) for t in tasks]
    return out


def is_chief(strategy=None) -> bool:
    """Whether this process is the chief (writes summaries, exports; worker 0 without a chief).

    Example:

    >>> is_chief(tf.distribute.get_strategy())
    True

    Args:
        strategy: the strategy, or `None` for `TF_CONFIG`. Defaults to `None`.

    Returns:
        `True` on the chief and in a single-process run.
    """
    return worker_info(strategy).is_chief


def worker_dir(root, strategy=None) -> str:
    """This worker's own folder under `root`: `root/<task_type>-<task_id>` in a cluster, else `root`.

    Use it for `quarantine_dir` and for `BackupAndRestore(backup_dir=...)`:
    the same code then runs on one machine and on a cluster, and two
    workers sharing a file system never write the same file.

    Example:

    >>> worker_dir("runs/q")
    'runs/q'

    Args:
        root: the shared root folder.
        strategy: the strategy, or `None` for `TF_CONFIG`. Defaults to `None`.

    Returns:
        The folder path (not created).
    """
    info = worker_info(strategy)
    root = os.fspath(root)
    return os.path.join(root, info.name) if info.in_cluster else root


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

    >>> with lost_workers():
    ...     pass

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


__all__ = [
    "FIX",
    "TASK_TYPES",
    "WorkerInfo",
    "enable_multi_worker",
    "is_chief",
    "lost_worker_error",
    "lost_workers",
    "tf_config",
    "worker_dir",
    "worker_info",
]
