"""A script that ends training with `sys.exit(0)` in a callback: a successful stop, not a failure.

`SystemExit` with status 0 (`sys.exit()`, `sys.exit(0)`, `sys.exit(None)`)
is how a script says it is done. Raised in a callback, it leaves `fit`
before tfguard's own callbacks (appended after the script's) have seen the
epoch it ended, and before Keras calls `on_train_end`. `EpochEndWatch`
brackets the script's callbacks (one callback first, one last) and keeps
the logs of an epoch end the callbacks did not all see, so the session can
log that epoch and end the run as completed before the exit goes on.
`os._exit` runs no Python code at all: nothing can be logged or reported
after it (docs/reliability.md).

Example:

>>> watch = EpochEndWatch()
>>> watch.first.on_epoch_end(2, {"loss": 0.5})
>>> watch.cut_short()
(2, {'loss': 0.5})
>>> watch.last.on_epoch_end(2, {"loss": 0.5})
>>> watch.cut_short() is None
True
>>> successful_exit(SystemExit(0)), successful_exit(SystemExit(None)), successful_exit(SystemExit(3))
(True, True, False)
"""

from __future__ import annotations

import keras


def successful_exit(error: BaseException) -> bool:
    """Whether `error` is a `SystemExit` whose exit status is 0 (as Python maps `code`)."""
    if not isinstance(error, SystemExit):
        return False
    code = error.code
    return code is None or (isinstance(code, int) and int(code) == 0)


class _Edge(keras.callbacks.Callback):
    def __init__(self, watch: EpochEndWatch, opening: bool):
        super().__init__()
        self._watch = watch
        self._opening = opening

    def on_epoch_end(self, epoch, logs=None):
        # the same dict every callback gets: what the session's logger would have seen
        self._watch.pending = (int(epoch), logs if logs is not None else {}) if self._opening else None


class EpochEndWatch:
    """Two callbacks around the script's: `first` notes an epoch end, `last` clears it.

    Attributes:
        first: the callback to put before the script's callbacks.
        last: the callback to put after tfguard's own (the logger, the live diagnosis).
        pending: `(epoch, logs)` of an epoch end not every callback saw, or `None`.
    """

    def __init__(self):
        self.pending: tuple[int, dict] | None = None
        self.first = _Edge(self, opening=True)
        self.last = _Edge(self, opening=False)

    def cut_short(self) -> tuple[int, dict] | None:
        """`(epoch, logs)` of the epoch end an exception cut short, or `None`."""
        return self.pending


__all__ = ["EpochEndWatch", "successful_exit"]
