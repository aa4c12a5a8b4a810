"""Headless Chromium driven through the DevTools protocol on a pipe (no package, no port).

`--remote-debugging-pipe` makes Chromium read JSON commands, each ended by
a NUL byte, on its file descriptor 3 and answer on 4. Enough of the
protocol for the tab's tests: open a page, evaluate JavaScript in it, wait
for a condition.

Example (not run: it starts a browser):

    with DevTools() as browser:
        page = browser.open("http://127.0.0.1:6006/#tfguard")
        browser.wait(page, "document.title === 'TensorBoard'")
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

from tests.diagnose.report.test_reports import CHROMIUM, Elements, chromium, needs_chromium

__all__ = ["CHROMIUM", "DevTools", "Elements", "chromium", "needs_chromium"]


class DevTools:
    """A headless Chromium and one protocol connection to it."""

    def __init__(self, width: int = 1280, height: int = 1000):
        self.profile = tempfile.mkdtemp(prefix="chromium-devtools-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # above 10, so that moving them to 3 and 4 in the child cannot overwrite one another
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]
        os.close(to_chrome_r)
        os.close(from_chrome_w)

        def fds():  # the child's fd 3 reads our commands, its fd 4 writes the answers
            os.dup2(ends[0], 3)
            os.dup2(ends[1], 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--remote-debugging-pipe",
             f"--window-size={width},{height}", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=fds,
            pass_fds=(3, 4))  # kept open after preexec_fn has put the pipes there
        for fd in ends:
            os.close(fd)
        self._buffer = b""
        self._next = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        for fd in (self._to_chrome, self._from_chrome):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60) -> dict:
        """Sends one command; returns its `result` (raises on an `error`)."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                answer = json.loads(raw)
                if answer.get("id") == self._next:
                    if "error" in answer:
                        raise RuntimeError(f"{method} failed: {answer['error']}")
                    return answer.get("result", {})
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium closed the DevTools pipe during {method}")
            self._buffer += chunk
        raise TimeoutError(f"no answer to {method} in {timeout} s")

    def open(self, url: str) -> str:
        """Opens `url` in a new page; returns the session to talk to it."""
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        return self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def evaluate(self, session: str, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, session: str, expression: str, timeout: float = 60):
        """Evaluates `expression` until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.evaluate(session, expression)
            except RuntimeError as error:
                last = error
            else:
                if last:
                    return last
            time.sleep(0.25)
        raise AssertionError(f"{expression!r} never held in {timeout} s; last: {last!r}")
