"""Reading TensorBoard logs: runs, scalars, histograms, texts, images, hparams.

A fast, streaming, damage-tolerant reader of tfevents files. It reads the
TFRecord framing itself (CRC32C-checked, in bounded chunks), decodes events
with TensorBoard's own protos, and keeps only the tags and kinds asked for.
Runs of same-length scalar records are framed and decoded with numpy
(`blocks`, `template`). Whatever a file holds, memory stays within a chunk
plus one record of at most `records.MAX_RECORD_BYTES`, nothing raises, and
every bad spot is a `Damage` (file, offset, what was wrong, and its kind:
a cut tail, or data lost). It never imports TensorFlow.

Example:

>>> import tempfile
>>> import tensorflow as tf
>>> from tfguard.events import read_logdir
>>> logdir = tempfile.mkdtemp()
>>> with tf.summary.create_file_writer(logdir + "/train").as_default():
...     _ = tf.summary.scalar("train/loss", 0.25, step=7)
>>> steps, wall_times, values = read_logdir(logdir)["train"].scalars["train/loss"]
>>> int(steps[0]), float(values[0])
(7, 0.25)
"""

from tfguard.events._logdir import find_runs, read_logdir
from tfguard.events._records import Damage
from tfguard.events._run import Run, read_run
from tfguard.events._values import HistogramPoint, ImageInfo

__all__ = [
    "Damage",
    "HistogramPoint",
    "ImageInfo",
    "Run",
    "find_runs",
    "read_logdir",
    "read_run",
]
