"""Keras's `profile_batch`: `tf.profiler` traces a range of batches into the run directory.

`BatchProfiler((start, stop), run_path)` is called around each batch (1-based,
as Keras counts): it starts the profiler before batch `start` and stops it
after batch `stop`; the trace lands in `<run>/plugins/profile`, where
TensorBoard's Profile tab finds it. A profiler that cannot start (another
one running, a missing plugin) warns once and training goes on.

Example:

>>> profiler = BatchProfiler((3, 4), lambda: None)
>>> profiler.around(3, "begin")  # no run directory yet: nothing starts
>>> profiler.running
False
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable

import tensorflow as tf

from tfguard.summary._writers import SummaryWarning


class BatchProfiler:
    """Profiles batches `start..stop` (1-based, inclusive) into the run directory."""

    def __init__(self, batches: tuple[int, int], run_path: Callable[[], str | None]):
        self.start, self.stop_after = batches
        self._run_path = run_path
        self.running = False

    def around(self, batch: int, phase: str) -> None:
        """Called with `"begin"` before and `"end"` after each batch."""
        if phase == "begin" and batch == self.start and not self.running:
            path = self._run_path()
            if not path:
                return
            try:
                tf.profiler.experimental.start(path)
                self.running = True
            except Exception as error:  # noqa: BLE001 - a profiler that cannot start never stops training
                warnings.warn(f"tfguard: the profiler could not start ({type(error).__name__}: "
                              f"{error}); training goes on without a profile.", SummaryWarning,
                              stacklevel=2)
        elif phase == "end" and batch == self.stop_after:
            self.stop()

    def stop(self) -> None:
        """Stops a running profile (writes it); does nothing otherwise."""
        if self.running:
            self.running = False
            with contextlib.suppress(Exception):
                tf.profiler.experimental.stop()


__all__ = ["BatchProfiler"]
