"""A real TensorBoard server on 127.0.0.1 for the tests, and its JSON API.

Example (not run: starting a server takes seconds):

    with serve(logdir) as base:
        runs = poll(lambda: get(base, "/data/runs"), "any run")
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

TIMEOUT = 90.0


def free_port() -> int:
    """A port nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(base: str, path: str, body=None):
    """The server's JSON answer to `path` (a POST with `body` when given)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read().decode())


def get_bytes(base: str, path: str) -> bytes:
    """The server's raw answer to `path`."""
    with urllib.request.urlopen(base + path, timeout=10) as response:
        return response.read()


def poll(fn, what: str):
    """`fn()` once it answers something truthy (TensorBoard loads logs in the background)."""
    deadline = time.monotonic() + TIMEOUT
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except OSError as error:  # not listening yet, or a 5xx while loading
            last = error
        time.sleep(0.5)
    raise AssertionError(f"TensorBoard never showed {what}; last answer: {last!r}")


@contextlib.contextmanager
def serve(logdir):
    """Runs `tensorboard --logdir logdir` on a free local port; yields its base URL."""
    port = free_port()
    binary = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    server = subprocess.Popen(
        [binary, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port), "--reload_interval", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,  # a pipe nobody reads would block it once full
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:  # killed, not asked to stop: it holds nothing to save, and it took over 20 s to heed SIGTERM
        server.kill()
        server.wait(timeout=20)
