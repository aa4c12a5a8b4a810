"""POST each event of the watch to a webhook from a background thread; say and count what was not delivered.

Each event's `tfguard.watch/1` JSON (the same as a `--json` line) is POSTed
as `application/json`, one event per POST, by a background thread, so a slow
or dead endpoint never delays a poll. What is promised:

- **Bounded tries.** One POST may take `timeout` seconds in all (connect,
  send, the whole answer: an endpoint that answers a byte at a time is cut
  there, `tfguard.watch._post`); a failed POST is tried `retries` more times
  with a doubling pause. While the endpoint keeps failing, each later event
  gets one try until one is delivered.
- **Only 2xx counts.** A redirect is refused, not followed (a POST must not
  become a body-less GET); an HTTP status of 300 or more fails the try.
- **Errors first.** Events wait in an `Outbox` of `queue_size`: an endpoint
  that falls behind gets errors before warnings before infos, and a full
  outbox drops the least severe first, never an error while a warning or an
  info waits.
- **The end waits, within a bound.** `finish` queues the summary and waits up
  to `wait` seconds (Ctrl-C stops waiting) for what is queued to be sent;
  `tfguard watch --once` therefore delivers its events before it exits.
- **Nothing lost in silence.** The first failure of a run of failures and the
  recovery are said (`notice`, stderr); at the end, every event not
  delivered (failed, dropped, still waiting) is said with its count by
  severity, and `finish` returns that count (`tfguard watch` exits 3).
- **No secrets in messages.** The URL is said without credentials, query or
  the path past its first segment (`tfguard.watch._post.shown_url`).

Only `http` and `https` URLs are taken (urllib would also open `file:` URLs).

Example:

>>> WebhookOutput("ftp://example.org/hook")
Traceback (most recent call last):
...
tfguard._errors.ContractError: Received an invalid webhook URL 'ftp://example.org/hook', expected an http:// or https:// URL (e.g. http://127.0.0.1:8080/hook).
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import threading
import time
import urllib.parse
from collections.abc import Callable

from tfguard import __version__
from tfguard._errors import ContractError
from tfguard.watch._event import WatchEvent
from tfguard.watch._outbox import SEVERITIES, Outbox
from tfguard.watch._post import DeliveryError, post, shown_url

__all__ = ["DEFAULT_TIMEOUT", "DEFAULT_WAIT", "WebhookOutput"]

DEFAULT_TIMEOUT = 5.0
"""Seconds one POST may take in all (5 s)."""
DEFAULT_WAIT = 60.0
"""Seconds the end of a watch waits for queued events to be delivered (60 s)."""
_NOTICE_AFTER = 1.0  # seconds of waiting at the end before saying that it waits


def _seconds(name: str, value, *, zero: bool, meaning: str) -> float:
    """`value` as finite seconds (> 0, or >= 0 with `zero`), else a `ContractError`."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0 or (number == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise ContractError(
            f"Received an invalid value for `{name}`, expected a finite number of seconds {bound} "
            f"{meaning}. Received: {name}={value!r}")
    return number


def _check_url(url: str) -> str:
    try:
        parts = urllib.parse.urlsplit(str(url))
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        valid = False
    if not valid:
        raise ContractError(
            f"Received an invalid webhook URL {shown_url(url)!r}, expected an http:// or https:// "
            "URL (e.g. http://127.0.0.1:8080/hook).")
    return str(url)


def _by_severity(counts: collections.Counter) -> str:
    return ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s])


class WebhookOutput:
    """Sends events to one URL from a background thread (see the module docstring).

    Args:
        url: the endpoint (`http://` or `https://`).
        timeout: seconds one POST may take in all. Defaults to `DEFAULT_TIMEOUT` (5).
        retries: further tries of a failed POST. Defaults to `2`.
        backoff: seconds before the first retry, doubled at each. Defaults to `0.5`.
        notice: says a failure, a recovery, what was not delivered (e.g. on
            stderr). Defaults to `None`.
        queue_size: the most events waiting to be sent. Defaults to `1000`.
        wait: seconds `finish` waits for what is queued. Defaults to `DEFAULT_WAIT` (60).

    Raises:
        ContractError: if `url` is not an http(s) URL, or a number is out of range.
    """

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT, retries: int = 2,
                 backoff: float = 0.5, notice: Callable[[str], None] | None = None,
                 queue_size: int = 1000, wait: float = DEFAULT_WAIT):
        self.url = _check_url(url)
        self.shown = shown_url(url)
        self.timeout = _seconds("timeout", timeout, zero=False, meaning="one POST may take")
        self.backoff = _seconds("backoff", backoff, zero=True, meaning="before the first retry")
        self.wait = _seconds("wait", wait, zero=True,
                             meaning="the end waits for queued events to be delivered")
        if not isinstance(retries, int) or retries < 0:
            raise ContractError("Received an invalid value for `retries`, expected an integer >= 0. "
                                f"Received: retries={retries!r}")
        if not isinstance(queue_size, int) or queue_size < 1:
            raise ContractError("Received an invalid value for `queue_size`, expected an integer "
                                f">= 1. Received: queue_size={queue_size!r}")
        self.retries = retries
        self._notice = notice
        self.sent = 0
        self.queued = 0
        self.failures: collections.Counter = collections.Counter()  # by severity
        self._last_reason = ""
        self._failing = False
        self._stop = threading.Event()
        self._in_flight: str | None = None
        self._outbox = Outbox(queue_size)
        self._thread = threading.Thread(target=self._work, name="tfguard-webhook", daemon=True)
        self._thread.start()

    @property
    def failed(self) -> int:
        """Events whose every try failed."""
        return sum(self.failures.values())

    @property
    def dropped(self) -> int:
        """Events dropped because `queue_size` events were waiting."""
        return sum(self._outbox.dropped.values())

    def start(self, logdir: str, interval: float | None) -> None:
        """Sends nothing at the start."""

    def notice(self, text: str) -> None:
        """Remarks of the watch are not sent."""

    def emit(self, event: WatchEvent) -> None:
        """Queues one event; never blocks, never raises."""
        self.queued += 1
        self._outbox.put((event.to_json(), event.severity), event.severity)

    def finish(self, result) -> int:
        """Queues the summary, waits up to `wait` seconds for the queue to be sent, says what was not.

        Returns:
            The events not delivered: failed, dropped, or still waiting at the end.
        """
        self.queued += 1
        self._outbox.put_last((result.to_json(), "info"))
        self._outbox.close()
        deadline = time.monotonic() + self.wait
        try:
            self._thread.join(min(_NOTICE_AFTER, self.wait))
            if self._thread.is_alive() and self.wait > _NOTICE_AFTER:
                waiting = sum(self._outbox.waiting().values()) + (self._in_flight is not None)
                self._say(f"webhook {self.shown}: delivering {waiting} waiting event(s), for at "
                          f"most {self.wait:g} s (Ctrl-C stops waiting)")
                self._thread.join(max(0.0, deadline - time.monotonic()))
        except KeyboardInterrupt:
            pass
        self._stop.set()
        left = self._outbox.waiting()
        if self._in_flight is not None:
            left[self._in_flight] += 1
        lost = self.failures + self._outbox.dropped + left
        total = sum(lost.values())
        if total:
            why = []
            if self.failed:
                why.append(f"{self.failed} failed after their tries ({self._last_reason})")
            if self.dropped:
                why.append(f"{self.dropped} dropped while {self._outbox.size} were waiting")
            if sum(left.values()):
                why.append(f"{sum(left.values())} still waiting when the watch ended")
            self._say(f"webhook {self.shown}: {total} of {self.queued} event(s) not delivered "
                      f"({_by_severity(lost)}): {'; '.join(why)}")
        return total

    def _work(self) -> None:
        while not self._stop.is_set():
            item = self._outbox.take()
            if item is None or self._stop.is_set():
                return
            doc, severity = item
            self._in_flight = severity
            try:
                delivered = self._deliver(doc)
            finally:
                self._in_flight = None
            if delivered:
                self.sent += 1
            elif not self._stop.is_set():
                self.failures[severity] += 1

    def _deliver(self, doc: dict) -> bool:
        body = json.dumps(doc, allow_nan=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "User-Agent": f"tfguard-watch/{__version__}"}
        tries = 1 if self._failing else self.retries + 1
        for attempt in range(tries):
            if attempt and self._stop.wait(self.backoff * 2 ** (attempt - 1)):
                return False
            try:
                post(self.url, body, timeout=self.timeout, headers=headers)
            except DeliveryError as error:
                self._last_reason = str(error)
                continue
            if self._failing:
                self._failing = False
                self._say(f"webhook {self.shown} delivers again")
            return True
        if not self._failing:
            self._failing = True
            self._say(f"webhook {self.shown} failed after {tries} tries ({self._last_reason}); "
                      "the watch goes on, each later event gets one try until one is delivered")
        return False

    def _say(self, text: str) -> None:
        if self._notice is not None:
            with contextlib.suppress(Exception):  # a notice must never stop the sender
                self._notice(text)
