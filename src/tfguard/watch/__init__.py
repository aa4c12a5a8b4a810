"""`tfguard watch`: follow the event files of running jobs and say each finding once.

The watch follows a log directory as jobs write it, locally or on a mounted
filesystem, in tfguard's Logger layout or the stock Keras callback's:

- it reads only what was appended since the last look (`follow`), and picks
  up runs and files that appear (`logdir`, `runs`);
- it waits for the rest of a half-written record, and reports damage only
  when it does not heal (the file stopped growing, or the spot stayed bad);
- it diagnoses again only the runs that got new records, with the rules and
  words of `tfguard diagnose` (`diagnosis`), and says each new finding once,
  with its run, step, root cause and fix, and once when it goes away
  (`stream`);
- on the terminal, as JSON lines, or POSTed to a webhook (`outputs`).

It never imports TensorFlow or Keras.

Example:

>>> import tempfile
>>> from tfguard.watch import watch_logdir
>>> watch_logdir(tempfile.mkdtemp(), once=True).summary()
'tfguard watch: one pass after 1 poll in ... s; 0 runs, 0 findings open, 0 resolved, 0 B read'
"""

from tfguard.watch._event import SCHEMA, WatchEvent
from tfguard.watch._follow import DEFAULT_SETTLE, ByteCounter, FileFollower
from tfguard.watch._jsonlines import JsonLinesOutput
from tfguard.watch._loop import DEFAULT_INTERVAL, EXIT_ON, Watcher, WatchResult, watch_logdir
from tfguard.watch._outputs import watch_outputs
from tfguard.watch._terminal import TerminalOutput
from tfguard.watch._webhook import WebhookOutput

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_SETTLE",
    "EXIT_ON",
    "SCHEMA",
    "ByteCounter",
    "FileFollower",
    "JsonLinesOutput",
    "TerminalOutput",
    "WatchEvent",
    "WatchResult",
    "Watcher",
    "WebhookOutput",
    "watch_logdir",
    "watch_outputs",
]
