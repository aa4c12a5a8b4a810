"""One HTTP POST with a deadline on the whole exchange and no redirects: the webhook's transport.

`post` sends one body to one URL with urllib (so `http_proxy` /
`https_proxy` are honoured) and gives up when the whole exchange (connect,
send, the answer's status line, headers and first 64 KiB) has not ended
`timeout` seconds after it began: a watchdog shuts the connection's socket
down, so an endpoint that answers a byte at a time cannot hold the sender.
A redirect (3xx) is refused, not followed: urllib would turn the POST into
a GET without a body and count it delivered. Any status but 2xx fails.

`shown_url` is how a webhook is named in messages and logs: without the
credentials, the query and the path past its first segment, where services
put their tokens (`https://hooks.slack.com/services/T0/B0/XXXX`).

Example:

>>> shown_url("https://bot:s3cret@hooks.example.org/services/T0/B0/XXXX?token=abc")
'https://hooks.example.org/services/…'
>>> shown_url("http://127.0.0.1:8080/hook")
'http://127.0.0.1:8080/hook'
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["DeliveryError", "post", "shown_url"]

_ANSWER_BYTES = 1 << 16  # the most of an answer read (it is not used)


class DeliveryError(Exception):
    """A POST that did not end with a 2xx answer; the message says why, in a few words."""


def shown_url(url: str) -> str:
    """The URL as said in messages: scheme, host, port and first path segment only.

    Never raises: a URL that does not parse is shown by its scheme alone.
    """
    try:
        parts = urllib.parse.urlsplit(str(url))
        host, port = parts.hostname or "", parts.port
    except ValueError:
        scheme = str(url).split(":", 1)[0] if ":" in str(url) else ""
        return f"{scheme[:10]}://…" if scheme.isalpha() else "…"
    if ":" in host:
        host = f"[{host}]"
    where = host + (f":{port}" if port is not None else "")
    segments = [s for s in parts.path.split("/") if s]
    path = f"/{segments[0]}" if segments else ""
    hidden = len(segments) > 1 or parts.query or parts.fragment
    return f"{parts.scheme}://{where}{path}{'/…' if hidden else ''}"


class _Sockets:
    """The sockets of one POST, shut down by the watchdog when its deadline passes."""

    def __init__(self):
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self.expired = False

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.append(sock)
            if self.expired:
                self._shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._open:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked recv/send in the sender thread


class _WatchedTCP(http.client.HTTPConnection):
    """Hands its TCP socket to a `_Sockets` as soon as it is connected (before any TLS handshake)."""

    def __init__(self, *args, sockets: _Sockets | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._sockets = sockets

    def connect(self):
        super().connect()
        if self._sockets is not None:
            self._sockets.add(self.sock)


class _WatchedHTTPS(http.client.HTTPSConnection, _WatchedTCP):
    """HTTPS whose TCP socket is watched: `HTTPSConnection.connect` calls `_WatchedTCP.connect` first."""

    def __init__(self, *args, sockets: _Sockets, **kwargs):
        super().__init__(*args, **kwargs)  # reaches _WatchedTCP.__init__ without `sockets`
        self._sockets = sockets


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, sockets: _Sockets):
        super().__init__()
        self._connection = functools.partial(_WatchedTCP, sockets=sockets)

    def http_open(self, req):
        return self.do_open(self._connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, sockets: _Sockets):
        self._tls = ssl.create_default_context()
        super().__init__(context=self._tls)
        self._connection = functools.partial(_WatchedHTTPS, sockets=sockets)

    def https_open(self, req):
        return self.do_open(self._connection, req, context=self._tls)


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises the 3xx as an HTTPError


def post(url: str, body: bytes, *, timeout: float, headers: dict[str, str]) -> int:
    """POSTs `body` to `url`; returns the 2xx status.

    Args:
        url: an http(s) URL.
        body: the request body.
        timeout: seconds the whole exchange may take.
        headers: request headers.

    Returns:
        The answer's HTTP status (200-299).

    Raises:
        DeliveryError: no 2xx answer within `timeout` seconds (a refused
            connection, a timeout, a redirect, an HTTP error status).
    """
    sockets = _Sockets()
    opener = urllib.request.build_opener(_HTTPHandler(sockets), _HTTPSHandler(sockets),
                                         _RefuseRedirects())
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    watchdog = threading.Timer(timeout, sockets.expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        with opener.open(request, timeout=timeout) as answer:
            answer.read(_ANSWER_BYTES)
            status = answer.status
    except urllib.error.HTTPError as error:
        with contextlib.suppress(Exception):
            error.close()
        if 300 <= error.code < 400:
            target = shown_url(urllib.parse.urljoin(url, error.headers.get("Location", "") or ""))
            raise DeliveryError(f"HTTP {error.code}: a redirect (to {target}), not followed; "
                                "give the URL it points to") from None
        raise DeliveryError(f"HTTP {error.code}") from None
    except (OSError, ValueError, http.client.HTTPException) as error:  # URLError is an OSError
        if sockets.expired:
            raise DeliveryError(f"no whole answer within {timeout:g} s") from None
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        raise DeliveryError(_words(reason)) from None
    finally:
        watchdog.cancel()
    return status


def _words(reason) -> str:
    if isinstance(reason, BaseException):
        text = str(reason) or type(reason).__name__
        return text if isinstance(reason, OSError) else f"{type(reason).__name__}: {text}"
    return str(reason)
