"""The watch as JSON lines: one `tfguard.watch/1` object per line, for other tools.

Every event is one line (`WatchEvent.to_json`), written and flushed as it
happens; the last line is the summary (`"event": "summary"`). Nothing else
goes to the stream: notices go to `errors`.

Example:

>>> import io, json
>>> from tfguard.watch._event import WatchEvent
>>> stream = io.StringIO()
>>> JsonLinesOutput(stream).emit(WatchEvent("run", "lr_1", "new run (keras log)"))
>>> json.loads(stream.getvalue())["event"]
'run'
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TextIO

from tfguard.watch._event import WatchEvent

__all__ = ["JsonLinesOutput"]


class JsonLinesOutput:
    """Writes each event as one strict-JSON line.

    Args:
        stream: where the lines go (stdout).
        errors: where notices go, e.g. a stderr printer. Defaults to `None` (dropped).
    """

    def __init__(self, stream: TextIO, *, errors: Callable[[str], None] | None = None):
        self.stream = stream
        self.errors = errors

    def _write(self, doc: dict) -> None:
        self.stream.write(json.dumps(doc, allow_nan=False) + "\n")
        self.stream.flush()

    def start(self, logdir: str, interval: float | None) -> None:
        """Writes nothing: the stream holds events only."""

    def notice(self, text: str) -> None:
        """Passes a remark of the watch to `errors`."""
        if self.errors is not None:
            self.errors(text)

    def emit(self, event: WatchEvent) -> None:
        """Writes one event line."""
        self._write(event.to_json())

    def finish(self, result) -> None:
        """Writes the summary line (`WatchResult.to_json`)."""
        self._write(result.to_json())
