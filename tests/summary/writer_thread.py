"""Waiting for a `RunWriter`'s own thread in the tests that hand it values (`write_later`, `StepQueue.emit`)."""

from __future__ import annotations

import time


def thread_done(writer) -> None:
    """Waits until the writer's thread wrote what it was handed and ended (nothing else is called meanwhile)."""
    deadline = time.monotonic() + 30
    while writer._thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer._thread is None
