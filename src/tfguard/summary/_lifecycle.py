"""Getting logs to disk when training ends badly: SIGTERM, Ctrl-C, exceptions, exit.

Keras calls `on_train_end` only when `fit` returns. A run stopped by an
exception, by Ctrl-C or by a scheduler's SIGTERM would otherwise lose the
events still queued in the writer. Three pieces cover the exits a callback
can see:

* `SignalHook`: for the duration of `fit`, a SIGTERM (and a SIGINT) handler
  that saves the logs, then chains to the previous handler. Under the
  default action the logs are flushed and closed and the signal is
  re-raised, so the process still dies by SIGTERM with the status a
  supervisor expects. A Python handler (Python's own SIGINT handler, which
  raises `KeyboardInterrupt`) is called after a flush: it decides, and if
  it raises, the exception closes the logs on its way out of the step; if
  it lets training go on, logging goes on. Under `SIG_IGN` the logs are
  flushed and training goes on. So a Ctrl-C has the logs on disk wherever
  the `KeyboardInterrupt` lands.
* `wrap_train_function`: the model's train function for the duration of
  `fit`, so an exception raised by the step (a `GuardViolation`, a data
  error, `KeyboardInterrupt` while a step runs) closes the logs before it
  propagates (it is always re-raised).
* `on_exit`: an `atexit` hook that closes whatever is still open when the
  interpreter exits (an exception raised outside the step, in another
  callback, that ends the program).

Example:

>>> hook = SignalHook(lambda final: None)
>>> hook.install() in (True, False)
True
>>> hook.restore()
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import weakref
from collections.abc import Callable

import tensorflow as tf

from tfguard import _seam
from tfguard._hooks.installed import is_installed, set_installed

_OPEN: weakref.WeakSet = weakref.WeakSet()
_ATEXIT_REGISTERED = False
_LOCK = threading.Lock()
INNER = "_tfguard_logger_inner"


_HOOKS: dict[int, list] = {}
_ORIGINAL: dict[int, object] = {}


def _dispatch(signum, frame) -> None:
    """The one installed handler per signal: every active hook, newest first, then the original."""
    hooks = list(_HOOKS.get(signum, ()))
    previous = _ORIGINAL.get(signum)
    final = previous is None or previous == signal.SIG_DFL
    for hook in reversed(hooks):
        with contextlib.suppress(Exception):  # the signal must go on whatever the logs did
            hook._callback(final)
    if not final:
        if callable(previous):
            previous(signum, frame)
        return
    _HOOKS.pop(signum, None)
    _ORIGINAL.pop(signum, None)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


class SignalHook:
    """Runs `callback(final)` on a signal, then the handler that was there before.

    All hooks of one signal share one installed handler, so loggers can be
    installed and removed in any order (several loggers in one `fit`).

    Args:
        callback: saves the logs; `final=True` (the default action follows:
            the process dies) asks to flush and close, `final=False` to flush
            only. Its exceptions are swallowed: the signal must still reach
            the previous handler.
        signum: the signal. Defaults to `signal.SIGTERM`.
    """

    def __init__(self, callback: Callable[[bool], None], signum: int = signal.SIGTERM):
        self._callback = callback
        self.signum = signum
        self._installed = False

    def install(self) -> bool:
        """Installs the hook; `False` outside the main thread (where Python forbids handlers)."""
        if self._installed:
            return True
        if threading.current_thread() is not threading.main_thread():
            return False
        hooks = _HOOKS.setdefault(self.signum, [])
        if not hooks:
            try:
                previous = signal.signal(self.signum, _dispatch)
            except (ValueError, OSError):  # not the main interpreter, or no such signal
                return False
            if previous is not _dispatch:
                _ORIGINAL[self.signum] = previous
        hooks.append(self)
        self._installed = True
        return True

    def restore(self) -> None:
        """Removes the hook; the last one puts the original handler back (if still ours)."""
        if not self._installed:
            return
        self._installed = False
        hooks = _HOOKS.get(self.signum, [])
        if self in hooks:
            hooks.remove(self)
        if hooks:
            return
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(self.signum) is _dispatch:
                original = _ORIGINAL.pop(self.signum, signal.SIG_DFL)
                signal.signal(self.signum, original if original is not None else signal.SIG_DFL)


WARM_CALLS = 2  # a logged model that is not guarded compiles its recording trace at the first step, its plain one at the second


def wrap_train_function(model, on_error: Callable[[BaseException], None], peek=None, on_warm=None,
                        around=None):
    """Replaces `model.train_function` with one that reports exceptions (and peeks data).

    Args:
        model: a Keras model whose train function is built.
        on_error: called with any exception of the step except the end of
            the data (`StopIteration`, `OutOfRangeError`); the exception is
            then re-raised.
        peek: called once with the first batch: handed over by tfguard's
            host loop when the train function is one (`peek_batch`), else
            pulled on the host (that one call of Keras's train function
            iterates in Python, the later ones are untouched). Defaults to `None`.
        on_warm: called after each of the first `WARM_CALLS` calls that
            returned: the last call is the first after which every trace of
            the step (an instrumented model has two) is usually compiled, a
            start for measuring speed. Defaults to `None`.
        around: called as `around(call, "begin")` before and
            `around(call, "end")` after each call (1-based count over the
            wrapper's life: the profiler's batches). Defaults to `None`.

    Returns:
        The wrapper (pass it to `unwrap_train_function`), or `None` if the
        model has no train function yet.
    """
    while getattr(model.train_function, INNER, None) is not None:  # a wrapper left by an earlier fit
        if not _seam.restore(model, "train_function", model.train_function):
            break
    inner = model.train_function
    if inner is None:
        return None
    while getattr(inner, INNER, None) is not None:
        inner = getattr(inner, INNER)
    state = {"peek": peek, "calls": 0}
    peek_batch = getattr(inner, "peek_batch", None)
    if peek is not None and peek_batch is not None:
        peek_batch(peek)  # tfguard's host loop hands its batch over: nothing pulled, nothing retraced
        state["peek"] = None

    def train_function(iterator):
        state["all"] = state.get("all", 0) + 1
        if around is not None:
            around(state["all"], "begin")
        try:
            if state["peek"] is not None:
                peek, state["peek"] = state["peek"], None
                first = next(iterator)
                with contextlib.suppress(Exception):  # a picture is never worth a training step
                    peek(first)
                iterator = _Prepend(first, iterator)
            outputs = inner(iterator)
            if on_warm is not None and state["calls"] < WARM_CALLS:
                state["calls"] += 1
                on_warm()
            if around is not None:
                around(state["all"], "end")
            return outputs
        except (StopIteration, tf.errors.OutOfRangeError):
            raise
        except BaseException as error:
            on_error(error)
            raise

    set_installed(train_function, is_installed(inner))
    if peek_batch is not None:
        train_function.peek_batch = peek_batch
    setattr(train_function, INNER, inner)
    _seam.replace(model, "train_function", train_function)
    return train_function


def unwrap_train_function(model, wrapper) -> None:
    """Restores the train function `wrap_train_function` replaced (if still in place)."""
    if wrapper is not None:
        _seam.restore(model, "train_function", wrapper)


class _Prepend:
    """`first`, then the rest of `iterator` (a plain Python iterator)."""

    def __init__(self, first, iterator):
        self._first = [first]
        self._iterator = iterator

    def __iter__(self):
        return self

    def __next__(self):
        if self._first:
            return self._first.pop()
        return next(self._iterator)


def register_open(closer) -> None:
    """Closes `closer` (an object with `_close_at_exit()`) at interpreter exit if still open."""
    global _ATEXIT_REGISTERED
    with _LOCK:
        _OPEN.add(closer)
        if not _ATEXIT_REGISTERED:
            atexit.register(on_exit)
            _ATEXIT_REGISTERED = True


def unregister_open(closer) -> None:
    """Forgets `closer` (it closed normally)."""
    with _LOCK:
        _OPEN.discard(closer)


def on_exit() -> None:
    """Closes every still-open logger (the `atexit` hook)."""
    with _LOCK:
        pending = list(_OPEN)
        _OPEN.clear()
    for closer in pending:
        with contextlib.suppress(Exception):
            closer._close_at_exit()


__all__ = ["SignalHook", "on_exit", "register_open", "unregister_open", "unwrap_train_function",
           "wrap_train_function"]
