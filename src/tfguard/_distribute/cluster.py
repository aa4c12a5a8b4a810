"""Who this process is in a multi-worker cluster: TF_CONFIG, the chief, per-worker folders.

`tf_config` builds the `TF_CONFIG` of one task; `worker_info` and
`is_chief` read back who this process is (the chief logs, the others do
not); `worker_dir` gives each worker its own folder under a shared root,
for quarantined batches and `keras.callbacks.BackupAndRestore` (Keras 3's
callback is not multi-worker aware: two workers saving into one folder
overwrite each other's files). Part of `tfguard._distribute.multiworker`.

Example:

>>> import json
>>> config = json.loads(tf_config(["127.0.0.1:2222", "127.0.0.1:2223"], 1))
>>> config["task"]
{'type': 'worker', 'index': 1}
>>> worker_info(environ={"TF_CONFIG": tf_config(["a:1", "b:2"], 0)}).is_chief
True
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping, Sequence

from tfguard._errors import ContractError

TASK_TYPES = ("chief", "worker")
"""The task types that train (MWMS has no parameter servers)."""

_ADDRESS = re.compile(r"^[^\s:/]+:\d{1,5}$")


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
            hint="build it with tfguard._distribute.multiworker.tf_config(workers, index)",
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

    >>> import tensorflow as tf
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


__all__ = ["TASK_TYPES", "WorkerInfo", "is_chief", "tf_config", "worker_dir", "worker_info"]
