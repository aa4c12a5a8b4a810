"""Summary values as `tf.summary.scalar/histogram/text` write them, built without a TensorFlow op.

Each value carries the plugin metadata TensorBoard reads (the scalar,
histogram and text plugins' own `metadata.create_summary_metadata`) and a
tensor encoded as TensorFlow's writer encodes it, so a `RunWriter` can put a
step's values into one `Summary` proto (`tfguard.summary._writers`).

Example:

>>> value = scalar_value("train/loss", 0.25)
>>> value.metadata.plugin_data.plugin_name, value.tensor.tensor_content == float32_bytes(0.25)
('scalars', True)
"""

from __future__ import annotations

import math
import struct
import time

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
from tensorboard.plugins.histogram import metadata as histogram_metadata
from tensorboard.plugins.scalar import metadata as scalar_metadata
from tensorboard.plugins.text import metadata as text_metadata

SCALAR_METADATA = scalar_metadata.create_summary_metadata(display_name=None, description=None)
"""A scalar's plugin metadata: its event file carries it with a tag's first value (`RunWriter`)."""
_HISTOGRAM_METADATA = histogram_metadata.create_summary_metadata(display_name=None, description=None)
_TEXT_METADATA = text_metadata.create_summary_metadata(display_name=None, description=None)
_SCALAR_SHAPE = tensor_shape_pb2.TensorShapeProto()
_FLOAT32 = struct.Struct("<f")


def float32_bytes(number) -> bytes:
    """`number` as a float32's 4 bytes (little-endian): beyond float32's range it is an infinity, as a cast makes it.

    >>> float32_bytes(1e300) == float32_bytes(float("inf")), len(float32_bytes(0.5))
    (True, 4)
    """
    number = float(number)
    try:
        return _FLOAT32.pack(number)
    except OverflowError:
        return _FLOAT32.pack(math.copysign(math.inf, number))


def scalar_value(tag: str, value) -> summary_pb2.Summary.Value:
    """A scalar summary value, as `tf.summary.scalar` writes it (float32 tensor).

    Example:

    >>> scalar_value("train/loss", 0.25).tensor.tensor_content == float32_bytes(0.25)
    True
    """
    summary_value = summary_pb2.Summary.Value(tag=tag, metadata=SCALAR_METADATA)
    fill_scalar(summary_value.tensor, value)
    return summary_value


def fill_scalar(tensor: tensor_pb2.TensorProto, number) -> None:
    """Makes `tensor` the float32 scalar `number`, encoded as TensorFlow's writer encodes it (`tensor_content`)."""
    tensor.dtype = types_pb2.DT_FLOAT
    tensor.tensor_shape.SetInParent()
    tensor.tensor_content = float32_bytes(number)


def scalar_frame(tag: str, described: bool) -> tuple[bytes, bytes]:
    """The serialized one-value `Summary` of a scalar, cut where its value's 4 bytes go: `(head, tail)`.

    `head + float32_bytes(number) + tail` is the `Summary` that
    `tf.summary.scalar` writes for `number` at `tag` (a float32 tensor), with
    the scalar plugin's metadata unless `described`. Serialized `Summary`
    messages joined are one `Summary` holding each one's values (protobuf
    merges a repeated field), so a step's thousand scalars cost a join, not
    a thousand proto values.

    Example:

    >>> head, tail = scalar_frame("train/loss", described=True)
    >>> value = summary_pb2.Summary.FromString(head + float32_bytes(0.25) + tail).value[0]
    >>> value.tag, value.tensor.tensor_content == float32_bytes(0.25), value.HasField("metadata")
    ('train/loss', True, False)
    """
    summary = summary_pb2.Summary()
    value = summary.value.add(tag=tag)
    fill_scalar(value.tensor, 0.0)
    if not described:
        value.metadata.CopyFrom(SCALAR_METADATA)
    serialized = summary.SerializeToString()
    tensor = summary_pb2.Summary.Value(tensor=value.tensor).SerializeToString()  # its field, ending in the 4 bytes
    at = serialized.rindex(tensor) + len(tensor) - 4  # after the tag, which comes first
    return serialized[:at], serialized[at + 4:]


def histogram_value(tag: str, buckets) -> summary_pb2.Summary.Value:
    """A histogram summary value from buckets `[k, 3]` (left edge, right edge, count).

    Example:

    >>> histogram_value("hist/weights/d/kernel", [[0.0, 1.0, 4.0]]).tensor.tensor_shape.dim[1].size
    3

    Raises:
        ValueError: if `buckets` is not `[k, 3]`.
    """
    array = np.asarray(buckets, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != 3:
        raise ValueError(
            f"Received invalid histogram buckets for '{tag}', expected shape [k, 3]. Received: shape={array.shape}"
        )
    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=n) for n in array.shape])
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, tensor_shape=shape,
                                    tensor_content=array.astype("<f8", copy=False).tobytes())  # make_tensor_proto's bytes, 10x sooner
    return summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=_HISTOGRAM_METADATA)


def text_value(tag: str, text: str) -> summary_pb2.Summary.Value:
    """A text summary value (markdown), as `tf.summary.text` writes it.

    Example:

    >>> text_value("config/model", "{}").tensor.string_val
    [b'{}']
    """
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, tensor_shape=_SCALAR_SHAPE)
    tensor.string_val.append(str(text).encode("utf-8"))
    return summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=_TEXT_METADATA)


def session_start_event(step: int, wall_time: float | None = None) -> event_pb2.Event:
    """The `Event` that tells TensorBoard a run restarted at `step` (`SessionLog.START`).

    TensorBoard (and `tfguard.events`) then drop the values of every tag that
    were written earlier with a step >= `step`: the orphans of a run killed
    after its last checkpoint.

    Example:

    >>> event = session_start_event(4, wall_time=1.0)
    >>> event.step, event.session_log.status == event_pb2.SessionLog.START
    (4, True)
    """
    return event_pb2.Event(
        step=int(step),
        wall_time=time.time() if wall_time is None else float(wall_time),
        session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START),
    )


__all__ = ["SCALAR_METADATA", "fill_scalar", "float32_bytes", "histogram_value", "scalar_frame", "scalar_value",
           "session_start_event", "text_value"]
