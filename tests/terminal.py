"""SIGINT as a terminal delivers it, whatever started the test suite.

A suite started from a background job (`make test &`, `nohup`) runs with
SIGINT ignored, and so does every process it starts: Python then installs
no `KeyboardInterrupt` handler, and a test that presses Ctrl-C on a
training job or a watch sees it finish instead. A user's Ctrl-C reaches a
process in the foreground; these helpers give a test that.

Example:

>>> import signal
>>> with sigint_raises():
...     signal.getsignal(signal.SIGINT) is signal.default_int_handler
True
"""

from __future__ import annotations

import contextlib
import signal


def sigint_default() -> None:
    """`preexec_fn` for a child a test interrupts: SIGINT back to its default before Python starts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def sigint_raises():
    """In this process: SIGINT raises `KeyboardInterrupt` inside the block, as in a terminal."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
