"""A **tfguard** tab in stock TensorBoard: the diagnosis of every run, where users already look.

`pip install tfguard` registers `TfguardPlugin` through the
`tensorboard_plugins` entry point; `tensorboard --logdir runs` then shows a
tfguard tab. For each run it shows the status (healthy, failed, out of
memory, no evidence), the findings root cause first with their evidence,
layer, onset step and fix, the firewall's violations on a timeline with
their quarantine folders and replay results, the fixes `tfguard run
--try-fixes` tried, and a ranking when the logdir holds several runs. It
reads tfguard's Logger and Keras's stock TensorBoard callback with the same
reader and rules as `tfguard diagnose` (`BoardCache`), and never imports
TensorFlow or Keras.

Example:

>>> import tempfile
>>> from tensorboard.plugins import base_plugin
>>> from tfguard.board import TfguardPlugin
>>> TfguardPlugin(base_plugin.TBContext(logdir=tempfile.mkdtemp())).runs_answer()["runs"]
[]
"""

from tfguard.board._cache import BoardCache
from tfguard.board._plugin import PLUGIN_NAME, TfguardPlugin

__all__ = ["PLUGIN_NAME", "BoardCache", "TfguardPlugin"]
