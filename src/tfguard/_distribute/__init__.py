"""Training on several replicas and machines: TF_CONFIG, the chief, per-worker folders, a lost worker.

Example:

>>> from tfguard._distribute import multiworker
>>> multiworker.worker_dir("runs/q")  # not in a cluster: the folder itself
'runs/q'
"""

from tfguard._distribute import multiworker
from tfguard._distribute.keras_20585 import enable_multi_worker

__all__ = ["enable_multi_worker", "multiworker"]
