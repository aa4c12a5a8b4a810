"""Multi-worker training: TF_CONFIG, the chief, per-worker folders, a lost worker.

A guarded model trains under `tf.distribute.MultiWorkerMirroredStrategy`
(MWMS) the same way it trains on one machine: every worker runs the same
program with its own `TF_CONFIG`, the guarded step all-reduces its failure
flags and counts, so every worker decides the same skip and reports the
same violation (with the counts of all workers), and the weights stay
identical. This module gathers the few things a multi-worker run needs on
top of that, from the modules that hold them:

* (`tfguard._distribute.cluster`) `tf_config` builds the `TF_CONFIG` of
  one task; `worker_info` and `is_chief` read back who this process is (the
  chief logs, the others do not);
* `worker_dir` gives each worker its own folder under a shared root, for
  quarantined batches and `keras.callbacks.BackupAndRestore` (Keras 3's
  callback is not multi-worker aware: two workers saving into one folder
  overwrite each other's files);
* `enable_multi_worker` (from `keras_20585`, the workaround kept apart so
  it can be deleted when Keras fixes keras-team/keras#20585) makes Keras
  3's `fit`/`evaluate` run under MWMS at all;
* (`tfguard._distribute.lost_worker`) `lost_workers` turns the raw TensorFlow error a survivor gets when a
  peer dies (`UnavailableError: ... tasks are unhealthy (stopped sending
  heartbeats)`, or a `DeadlineExceededError` from a collective timeout)
  into a `tfguard._errors.WorkerLostError` that names the lost worker's
  address, what was expected and the fix.

Example:

>>> environ = {"TF_CONFIG": tf_config(["h0:2222", "h1:2222"], 1)}
>>> info = worker_info(environ=environ)
>>> info.name, info.is_chief, info.peers()
('worker-1', False, [('worker', 0, 'h0:2222')])
"""

from __future__ import annotations

from tfguard._distribute.cluster import (
    TASK_TYPES,
    WorkerInfo,
    is_chief,
    tf_config,
    worker_dir,
    worker_info,
)
from tfguard._distribute.keras_20585 import enable_multi_worker
from tfguard._distribute.lost_worker import FIX, lost_worker_error, lost_workers

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
