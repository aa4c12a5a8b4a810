"""Writing TensorBoard logs: run directories, the Keras callback, images, hparams, projector.

Everything here writes; nothing decides. The tag names are those of
`tfguard._tags`, which `tfguard.events` reads back and `tfguard.diagnose`
turns into findings.

Example:

>>> import tempfile
>>> from tfguard.summary import Logger, run_dir
>>> logger = Logger(tempfile.mkdtemp(), {"lr": 1e-3})
>>> logger.run_path is None  # created on the first write
True
"""

from tfguard.summary._hparams import hparams_markdown, write_hparams
from tfguard.summary._images import feature_grid, unit_images
from tfguard.summary._logger import Logger
from tfguard.summary._projector import write_projector
from tfguard.summary._rundir import format_value, run_dir, sanitize_component
from tfguard.summary._writers import RunWriter, SummaryWarning

__all__ = [
    "Logger",
    "RunWriter",
    "SummaryWarning",
    "feature_grid",
    "format_value",
    "hparams_markdown",
    "run_dir",
    "sanitize_component",
    "unit_images",
    "write_hparams",
    "write_projector",
]
