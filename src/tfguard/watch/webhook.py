"""POST each event of the watch to a webhook, with retries and a timeout, never stopping the watch.

Each event's `tfguard.watch/1` JSON (the same as a `--json` line) is POSTed
as `application/json` by a background thread, so a slow or dead endpoint
never delays a poll. A failed POST (no connection, a timeout, an HTTP status
of 400 or more) is retried `retries` times with a doubling pause; an event
that still fails is dropped and said once per run of failures (`notice`),
and so is the endpoint's recovery. At most `queue_size` events wait; more
are dropped and counted. At the end, `finish` waits at most `timeout`
seconds for what is queued. Only `http` and `https` URLs are taken (urllib
would also open `file:` URLs).

Example:

>>> WebhookOutput("ftp://example.org/hook")
Traceback (most recent call last):
...
tfguard.errors.ContractError: Received an invalid webhook URL 'ftp://example.org/hook', expected an http:// or https:// URL (e.g. http://127.0.0.1:8080/hook).
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

from tfguard import __version__
from tfguard.errors import ContractError
from tfguard.watch.event import WatchEvent

__all__ = ["WebhookOutput"]

_STOP = object()


class WebhookOutput:
    """Sends events to one URL from a background thread.

    Args:
        url: the endpoint (`http://` or `https://`).
        timeout: seconds one POST may take; also the most `finish` waits.
            Defaults to `5.0`.
        retries: further tries of a failed POST. Defaults to `2`.
        backoff: seconds before the first retry, doubled at each. Defaults to `0.5`.
        notice: says a failure or a recovery (e.g. on stderr). Defaults to `None`.
        queue_size: the most events waiting to be sent. Defaults to `1000`.

    Raises:
        ContractError: if `url` is not an http(s) URL.
    """

    def __init__(self, url: str, *, timeout: float = 5.0, retries: int = 2, backoff: float = 0.5,
                 notice: Callable[[str], None] | None = None, queue_size: int = 1000):
        parts = urllib.parse.urlsplit(str(url))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ContractError(
                f"Received an invalid webhook URL {url!r}, expected an http:// or https:// URL "
                "(e.g. http://127.0.0.1:8080/hook).")
        self.url = str(url)
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self._notice = notice
        self.sent = self.failed = self.dropped = 0
        self._failing = False
        self._queue: queue.Queue = queue.Queue(maxsize=int(queue_size))
        self._thread = threading.Thread(target=self._work, name="tfguard-webhook", daemon=True)
        self._thread.start()

    def start(self, logdir: str, interval: float | None) -> None:
        """Sends nothing at the start."""

    def notice(self, text: str) -> None:
        """Remarks of the watch are not sent."""

    def emit(self, event: WatchEvent) -> None:
        """Queues one event; never blocks, never raises."""
        self._put(event.to_json())

    def finish(self, result) -> None:
        """Queues the summary, then waits at most `timeout` seconds for the queue to drain."""
        self._put(result.to_json())
        with contextlib.suppress(queue.Full):
            self._queue.put(_STOP, timeout=self.timeout)
        self._thread.join(self.timeout)

    def _put(self, doc: dict) -> None:
        try:
            self._queue.put_nowait(doc)
        except queue.Full:
            self.dropped += 1

    def _work(self) -> None:
        while True:
            doc = self._queue.get()
            if doc is _STOP:
                return
            self._deliver(doc)

    def _deliver(self, doc: dict) -> None:
        body = json.dumps(doc, allow_nan=False).encode("utf-8")
        error = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(
                self.url, data=body, method="POST",
                headers={"Content-Type": "application/json",
                         "User-Agent": f"tfguard-watch/{__version__}"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    response.read(1 << 16)
                self.sent += 1
                if self._failing:
                    self._failing = False
                    self._say(f"webhook {self.url} delivers again")
                return
            except (urllib.error.URLError, OSError, ValueError) as err:  # HTTPError is a URLError
                error = err
        self.failed += 1
        if not self._failing:
            self._failing = True
            self._say(f"webhook {self.url} failed after {self.retries + 1} tries "
                      f"({_reason(error)}); the watch goes on, events are dropped until it answers")

    def _say(self, text: str) -> None:
        if self._notice is not None:
            with contextlib.suppress(Exception):  # a notice must never stop the sender
                self._notice(text)


def _reason(error: BaseException | None) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code}"
    if isinstance(error, urllib.error.URLError):
        return str(error.reason)
    return f"{type(error).__name__}: {error}"
