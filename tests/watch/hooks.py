"""Webhook endpoints of the watch tests: real HTTP servers on 127.0.0.1, each misbehaving one way.

`serve(handler)` runs a `http.server` handler class in a thread;
`trickle()` is a raw socket server that answers one byte at a time, forever.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import threading
import time


class Recorder(http.server.BaseHTTPRequestHandler):
    """Records each POST's JSON; answers 204 after `delay` seconds, or once `gate` is set."""

    received: list
    delay = 0.0
    gate: threading.Event | None = None

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.gate is not None:
            self.gate.wait(30)
        time.sleep(self.delay)
        self.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


class Redirector(http.server.BaseHTTPRequestHandler):
    """Answers a POST to `/hook` with 302 to `/elsewhere`; records every request as `(method, path)`."""

    received: list

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.received.append(("POST", self.path))
        if self.path == "/hook":
            self.send_response(302)
            self.send_header("Location", "/elsewhere?token=abc")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(204)
        self.end_headers()

    def do_GET(self):  # noqa: N802
        self.received.append(("GET", self.path))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(handler: type, **attributes):
    """Serves `handler` (a subclass made with `attributes`) on 127.0.0.1; yields `(base URL, received)`."""
    received: list = []
    cls = type(handler.__name__, (handler,), {"received": received, **attributes})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), cls)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        gate = attributes.get("gate")
        if gate is not None:
            gate.set()
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def trickle(pause: float = 0.2):
    """An endpoint that reads the request, then answers `HTTP/1.1 200 OK...` one byte every `pause` s."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            with contextlib.suppress(OSError):
                conn.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\n" * 10_000:
                    if stop.wait(pause):
                        return
                    conn.sendall(bytes([byte]))

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def dead_url(path: str = "/hook") -> str:
    """An http URL on a port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}{path}"
