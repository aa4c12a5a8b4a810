"""Helpers of the events tests: real Event protos and real event files.

Files are written either by TensorFlow's own writers (`tf.summary`), by
TensorBoard's `EventFileWriter` (TF1-style values), or byte by byte with the
TFRecord framing when a test needs to know or damage exact offsets.
"""

from __future__ import annotations

import os
import struct

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from tfguard.events._records import frame_record


def scalar_event(tag: str, step: int, value: float, wall_time: float = 1000.0) -> event_pb2.Event:
    """A TF2-style scalar: a float32 tensor with the 'scalars' plugin, as tf.summary writes."""
    event = event_pb2.Event(step=step, wall_time=wall_time)
    item = event.summary.value.add(tag=tag)
    item.tensor.dtype = 1  # DT_FLOAT
    item.tensor.tensor_content = struct.pack("<f", value)
    item.metadata.plugin_data.plugin_name = "scalars"
    return event


def legacy_scalar_event(tag: str, step: int, value: float, wall_time: float = 1000.0):
    """A TF1-style scalar: `simple_value`, no metadata."""
    event = event_pb2.Event(step=step, wall_time=wall_time)
    event.summary.value.add(tag=tag, simple_value=value)
    return event


def legacy_histogram_event(tag, step, *, lo, hi, limits, counts, wall_time=1000.0):
    """A TF1-style `HistogramProto` value."""
    histo = summary_pb2.HistogramProto(
        min=lo, max=hi, num=sum(counts), bucket_limit=limits, bucket=counts
    )
    event = event_pb2.Event(step=step, wall_time=wall_time)
    event.summary.value.add(tag=tag, histo=histo)
    return event


def write_framed(path: str, events) -> list[int]:
    """Write events with the TFRecord framing; return each record's start offset."""
    offsets, frames, size = [], [], 0
    for event in events:
        data = event if isinstance(event, bytes) else event.SerializeToString()
        frames.append(frame_record(data))
        offsets.append(size)
        size += len(frames[-1])
    with open(path, "wb") as f:
        f.write(b"".join(frames))
    return offsets


def write_with_event_file_writer(logdir: str, events, *, suffix: str = "") -> str:
    """Write events with TensorBoard's own EventFileWriter; return the new file's path."""
    os.makedirs(logdir, exist_ok=True)
    before = set(os.listdir(logdir))
    writer = EventFileWriter(logdir, filename_suffix=suffix)
    for event in events:
        writer.add_event(event)
    writer.close()
    (name,) = set(os.listdir(logdir)) - before
    return os.path.join(logdir, name)


def record_spans(blob: bytes) -> list[tuple[int, int]]:
    """(start, end) of every record of a well-formed file, from its length fields."""
    spans, pos = [], 0
    while pos < len(blob):
        (length,) = struct.unpack_from("<Q", blob, pos)
        spans.append((pos, pos + 16 + length))
        pos += 16 + length
    return spans
