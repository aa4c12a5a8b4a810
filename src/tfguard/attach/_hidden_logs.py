"""`HideGuardLogs`: keeps the firewall's counters out of an attached script's logs.

A guarded model adds `guard_violations` and `guard_skipped` to the logs of
every step and epoch (`tfguard.guard`). A script that did not ask for a
guard would see them in its progress bar, its callbacks and its
`History`. This callback, placed first in the callback list, removes them
from the logs dict Keras hands to every callback in turn, so the script's
output and history are what they were without tfguard. The counts are not
lost: `AttachSession` records every violation as a `GuardEvent`.

Example:

>>> logs = {"loss": 0.5, "guard_violations": 0.0, "guard_skipped": 0.0}
>>> HideGuardLogs().on_epoch_end(0, logs)
>>> logs
{'loss': 0.5}
"""

from __future__ import annotations

import keras

from tfguard import _tags

GUARD_LOG_KEYS = _tags.KERAS_GUARD_LOGS


class HideGuardLogs(keras.callbacks.Callback):
    """Removes `guard_violations` and `guard_skipped` from the logs of every batch and epoch.

    Args:
        keys: the log keys to remove. Defaults to `("guard_violations", "guard_skipped")`.
    """

    def __init__(self, keys=GUARD_LOG_KEYS):
        super().__init__()
        self.keys = tuple(keys)

    def _hide(self, logs) -> None:
        if isinstance(logs, dict):
            for key in self.keys:
                logs.pop(key, None)

    def on_train_batch_end(self, batch, logs=None):
        self._hide(logs)

    def on_epoch_end(self, epoch, logs=None):
        self._hide(logs)

    def on_train_end(self, logs=None):
        self._hide(logs)


__all__ = ["GUARD_LOG_KEYS", "HideGuardLogs"]
