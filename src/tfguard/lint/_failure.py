"""How a training ended badly, in words a user can act on: the exception, the step, what to change.

`failure_record(error, model, step, batch_size)` turns the exception that
stopped `fit` into a small JSON-able record (the logger writes it as the
text tag `run/status`; `tfguard run` puts it in its report). Out of memory
(`tf.errors.ResourceExhaustedError`, a `MemoryError`, or an allocator
message saying so) gets the numbers that decide it: the batch size, the
parameter count, the largest layer's activations at that batch, and the
usual fixes (a smaller batch or resolution, `keras.backend.clear_session()`
between models in one process, GPU memory growth).

Example:

>>> import keras, tensorflow as tf
>>> model = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Conv2D(64, 3, name="conv"),
...                           keras.layers.Flatten(), keras.layers.Dense(10)])
>>> error = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
>>> record = failure_record(error, model, step=3, batch_size=256)
>>> record["status"], record["detail"]["largest_layer"], record["detail"]["batch_size"]
('out_of_memory', 'conv', 256)
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tfguard._findings import OOM_FIXES as FIXES
from tfguard._findings import describe_failure
from tfguard.lint._describe import leaf_layers

_OOM_WORDS = ("out of memory", "oom when allocating", "resource exhausted", "failed to allocate",
              "cannot allocate memory")


def is_out_of_memory(error: BaseException) -> bool:
    """Whether an exception is an out-of-memory failure (GPU or host).

    Example:

    >>> is_out_of_memory(MemoryError()), is_out_of_memory(ValueError("shapes differ"))
    (True, False)
    """
    if isinstance(error, (tf.errors.ResourceExhaustedError, MemoryError)):
        return True
    text = str(error).lower()
    return any(word in text for word in _OOM_WORDS)


def _elements(shape, batch_size: int) -> int | None:
    dims = list(shape)
    if not dims:
        return None
    dims[0] = batch_size
    if any(d is None for d in dims):
        return None
    return int(np.prod([int(d) for d in dims]))


def memory_profile(model: keras.Model, batch_size: int | None) -> dict:
    """The numbers that decide whether a step fits: parameters and the largest activation.

    Returns:
        `{"batch_size", "parameters", "largest_layer", "largest_activation_elements",
        "largest_activation_mb"}` (float32 bytes; `None` where unknown).
    """
    try:
        parameters = int(model.count_params())
    except ValueError:
        parameters = None
    largest, elements = None, None
    for layer in leaf_layers(model):
        try:
            shape = layer.output.shape
        except (AttributeError, ValueError):
            continue
        count = _elements(shape, batch_size or 1)
        if count is not None and (elements is None or count > elements):
            largest, elements = layer.name, count
    return {
        "batch_size": batch_size,
        "parameters": parameters,
        "largest_layer": largest,
        "largest_activation_elements": elements,
        "largest_activation_mb": None if elements is None else round(4 * elements / 2**20, 1),
    }


def failure_record(error: BaseException, model: keras.Model | None = None, step: int | None = None,
                   batch_size: int | None = None) -> dict:
    """The record of a training that stopped with `error` (see the module docstring)."""
    message = " ".join(str(error).split())
    if len(message) > 600:
        message = message[:600] + " ..."
    record = {"status": "failed", "type": type(error).__name__, "error": message, "step": step}
    if isinstance(error, KeyboardInterrupt):
        record["status"] = "aborted"
    elif is_out_of_memory(error):
        record["status"] = "out_of_memory"
        detail = memory_profile(model, batch_size) if model is not None else {"batch_size": batch_size}
        detail["fixes"] = list(FIXES)
        record["detail"] = detail
    return record


def end_record(status: str, step: int, reason: str | None = None) -> dict:
    """The Logger's end-of-training record (`run/status`) of a run that did not fail.

    A log without it (SIGKILL, a crash of the interpreter, a run still
    going) is diagnosed "interrupted", never healthy.

    Example:

    >>> end_record("success", 120)
    {'status': 'completed', 'step': 120}
    >>> end_record("aborted", 7, "SIGTERM")
    {'status': 'aborted', 'step': 7, 'type': 'SIGTERM', 'error': 'the process received SIGTERM'}

    Args:
        status: the Logger's ending: `"success"`, `"aborted"` (a signal,
            `close()` during training, the interpreter's exit) or `"failure"`.
        step: the last global step of the run's log.
        reason: what ended it (`"SIGTERM"`, `"SIGINT"`, `"exit"`, ...).
            Defaults to `None`.
    """
    if status == "success":
        return {"status": "completed", "step": int(step)}
    if status == "failure":  # an error the Logger did not see (a `with Logger(...)` block's)
        return {"status": "failed", "step": int(step), "type": reason or "error",
                "error": reason or "training ended with an error"}
    record = {"status": "aborted", "step": int(step)}
    if reason:
        described = f"the process received {reason}" if reason.startswith("SIG") else reason
        record.update(type=reason, error=described)
    return record


__all__ = ["FIXES", "describe_failure", "end_record", "failure_record", "is_out_of_memory",
           "memory_profile"]
