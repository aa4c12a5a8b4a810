"""A columnar view of many `Event` records, parsed by protobuf in one call.

Protobuf defines what parsing the concatenation of two serialized messages
does: it is the merge of both, where a repeated field appends, a singular
message field merges recursively, and a singular scalar keeps the last value.
So if the fields of TensorBoard's `Event` that a scalar needs are declared
*repeated* (and the messages that hold them *singular*), parsing the
concatenated records of a batch returns one list per field: every wall time,
every step, every tag, every dtype and every tensor content of the batch, in
order, with no Python object per record.

The field numbers and wire types are taken from TensorBoard's own descriptors
(`event_pb2.Event`, `summary_pb2.Summary`, `summary_pb2.Summary.Value`,
`tensor_pb2.TensorProto`); protobuf does the parsing. Lists line up with
records only when every record holds each field exactly once:
`aligned_columns` checks the counts and returns `None` otherwise, and the
caller falls back to parsing records one by one with `event_pb2.Event`.

Example:

>>> from tensorboard.compat.proto import event_pb2, types_pb2
>>> records = []
>>> for step in (1, 2):
...     event = event_pb2.Event(step=step, wall_time=10.0 + step)
...     value = event.summary.value.add(tag="loss")
...     value.tensor.dtype = types_pb2.DT_FLOAT
...     value.tensor.tensor_content = b"\\x00\\x00\\x80?"
...     records.append(event.SerializeToString())
>>> cols = aligned_columns(records)
>>> list(cols.steps), list(cols.tags), list(cols.dtypes)
([1, 2], [b'loss', b'loss'], [1, 1])
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2

__all__ = ["Columns", "aligned_columns"]

_PACKAGE = "tfguard_event_columns"
_F = descriptor_pb2.FieldDescriptorProto


def _number(descriptor, name: str, wire_type: int) -> int:
    """The field number of `descriptor.name`, checked against the expected type."""
    field = descriptor.fields_by_name[name]
    if field.type != wire_type:  # pragma: no cover - a changed TensorBoard proto
        raise RuntimeError(f"{descriptor.full_name}.{name} changed type; columns need {wire_type}")
    return field.number


def _build_classes():
    event = event_pb2.Event.DESCRIPTOR
    summary = summary_pb2.Summary.DESCRIPTOR
    value = summary_pb2.Summary.Value.DESCRIPTOR
    tensor = tensor_pb2.TensorProto.DESCRIPTOR
    schema = descriptor_pb2.FileDescriptorProto(
        name=f"{_PACKAGE}.proto", package=_PACKAGE, syntax="proto2"
    )

    def message(name: str, fields: list[tuple[str, int, int, int, str | None]]) -> None:
        proto = schema.message_type.add(name=name)
        for field_name, number, field_type, label, type_name in fields:
            field = proto.field.add(name=field_name, number=number, type=field_type, label=label)
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"

    repeated, optional = _F.LABEL_REPEATED, _F.LABEL_OPTIONAL
    # Event: the summary is kept as bytes, one per record, so records without
    # one are counted; its values are parsed in a second pass.
    message(
        "EventColumns",
        [
            (
                "wall_time",
                _number(event, "wall_time", _F.TYPE_DOUBLE),
                _F.TYPE_DOUBLE,
                repeated,
                None,
            ),
            ("step", _number(event, "step", _F.TYPE_INT64), _F.TYPE_INT64, repeated, None),
            ("summary", _number(event, "summary", _F.TYPE_MESSAGE), _F.TYPE_BYTES, repeated, None),
        ],
    )
    message(
        "SummaryColumns",
        [
            (
                "value",
                _number(summary, "value", _F.TYPE_MESSAGE),
                _F.TYPE_MESSAGE,
                optional,
                "ValueColumns",
            ),
        ],
    )
    # Tags as bytes: no UTF-8 decoding per value; a bad tag fails the per-record path.
    message(
        "ValueColumns",
        [
            ("tag", _number(value, "tag", _F.TYPE_STRING), _F.TYPE_BYTES, repeated, None),
            (
                "tensor",
                _number(value, "tensor", _F.TYPE_MESSAGE),
                _F.TYPE_MESSAGE,
                optional,
                "TensorColumns",
            ),
        ],
    )
    # The dtype enum is read as int32: same varint wire format, no enum checks.
    message(
        "TensorColumns",
        [
            ("dtype", _number(tensor, "dtype", _F.TYPE_ENUM), _F.TYPE_INT32, repeated, None),
            (
                "tensor_content",
                _number(tensor, "tensor_content", _F.TYPE_BYTES),
                _F.TYPE_BYTES,
                repeated,
                None,
            ),
        ],
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.EventColumns")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.SummaryColumns")),
    )


_EventColumns, _SummaryColumns = _build_classes()


@dataclass(frozen=True)
class Columns:
    """One entry per record of a batch, each field held exactly once per record.

    Args:
        wall_times: the records' wall times (a protobuf repeated container).
        steps: the records' steps.
        tags: each record's single value's tag, as bytes.
        dtypes: each value's tensor dtype (a `DataType` number).
        contents: each value's `tensor_content` bytes.
    """

    wall_times: object
    steps: object
    tags: object
    dtypes: object
    contents: object


def aligned_columns(records: list[bytes]) -> Columns | None:
    """Parse a batch of serialized `Event`s into aligned columns, or return `None`.

    The columns line up with `records` when every record has a wall time, a
    non-zero step (proto3 omits a zero step) and a summary of one value with a
    tag, a dtype and a tensor content: what `tf.summary.scalar` and
    `tf.summary.histogram` write. Anything else (a step 0, a text or image, a
    TF1 `simple_value`, a file-version event, a record that does not parse)
    returns `None` and the caller reads the batch record by record.

    Args:
        records: serialized `Event` protos, each one intact record.

    Returns:
        The `Columns`, or `None` when they cannot be aligned with `records`.
    """
    count = len(records)
    try:
        event = _EventColumns.FromString(b"".join(records))
        summaries = event.summary
        if len(summaries) != count or len(event.step) != count or len(event.wall_time) != count:
            return None
        if not all(summaries):  # an empty summary holds no value
            return None
        values = _SummaryColumns.FromString(b"".join(summaries)).value
    except Exception:  # the per-record path reports what is wrong
        return None
    tensor = values.tensor
    if (
        len(values.tag) != count
        or len(tensor.dtype) != count
        or len(tensor.tensor_content) != count
    ):
        return None
    return Columns(event.wall_time, event.step, values.tag, tensor.dtype, tensor.tensor_content)
