"""Decode a block of same-length scalar records with numpy, from one record's layout.

A `tf.summary.scalar` record is an `Event` of a wall time, a step and one
summary value: a tag, a float32 tensor of 4 bytes and the plugin metadata.
Records of the same length written by the same writer differ only in the
bytes of the wall time, the step, the tag and the 4 value bytes. A
`ScalarTemplate` learns where those bytes are from one record: protobuf
parses it and must serialize it back to the same bytes (the canonical
layout), and the positions of the tag and of the value are found by
changing them and comparing the serializations. Every other byte is fixed:
`match` checks, in one numpy comparison, which leading records of a block
have exactly the template's fixed bytes and a well-formed step varint, so
each of them parses as the template with its own values; `decode` reads the
wall times, steps, values and tags of those records as arrays.

A record that does not match (another structure, a step of another width)
is left to the per-record path, which parses it with protobuf.

Example:

>>> import struct
>>> from tensorboard.compat.proto import event_pb2, types_pb2
>>> from tensorboard.plugins.scalar import metadata as scalar_metadata
>>> def scalar(step, value):
...     event = event_pb2.Event(step=step, wall_time=1.0 + step)
...     item = event.summary.value.add(tag="loss")
...     item.tensor.dtype = types_pb2.DT_FLOAT
...     item.tensor.tensor_content = struct.pack("<f", value)
...     item.metadata.plugin_data.plugin_name = scalar_metadata.PLUGIN_NAME
...     return event.SerializeToString()
>>> rows = np.frombuffer(scalar(3, 0.5) + scalar(4, 0.25), np.uint8).reshape(2, -1)
>>> template = ScalarTemplate.learn(rows[0].tobytes())
>>> template.match(rows)
2
>>> steps, walls, values, tags = template.decode(rows)
>>> steps.tolist(), walls.tolist(), values.tolist(), factorize(tags)[0]
([3, 4], [4.0, 5.0], [0.5, 0.25], [b'loss'])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tensorboard.compat.proto import event_pb2, types_pb2

__all__ = ["ScalarTemplate", "factorize"]

_DT_FLOAT = types_pb2.DT_FLOAT
_WALL = slice(1, 9)  # field 1 (fixed64) comes first: key byte 0x09, then 8 bytes
_STEP_KEY = 9  # field 2 (varint) next: key byte 0x10 at 9, the varint from 10


def factorize(tags: np.ndarray) -> tuple[list[bytes], np.ndarray]:
    """The distinct rows of `tags` (`uint8 [n, width]`) and the index of each row's among them.

    Rows are hashed 8 bytes at a time and grouped by hash; every row is then
    compared with its group's first row, so a hash collision cannot merge
    two tags (it falls back to sorting the rows themselves).

    Example:

    >>> factorize(np.frombuffer(b"abcdab", np.uint8).reshape(3, 2))
    ([b'ab', b'cd'], array([0, 1, 0]))
    """
    count, width = tags.shape
    padded = np.zeros((count, -(-width // 8) * 8), np.uint8)
    padded[:, :width] = tags
    words = padded.view("<u8")
    hashes = words[:, 0].copy()
    for j in range(1, words.shape[1]):
        hashes = hashes * np.uint64(0x100000001B3) ^ words[:, j]
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if not (tags == tags[first][inverse]).all():  # a collision: sort the bytes themselves
        rows = np.ascontiguousarray(tags).view(f"V{width}").ravel()
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
    return [tags[i].tobytes() for i in first], inverse


def _changed(a: bytes, b: bytes) -> np.ndarray:
    """The positions where two serializations of the same length differ."""
    return np.flatnonzero(np.frombuffer(a, np.uint8) != np.frombuffer(b, np.uint8))


@dataclass(frozen=True)
class ScalarTemplate:
    """The byte layout of one length of TF2 float32 scalar records.

    Args:
        template: the record it was learned from, as `uint8`.
        fixed: `bool` mask of the bytes every matching record has as the template.
        step: `(start, stop)` of the step varint.
        tag: `(start, stop)` of the tag's UTF-8 bytes.
        value: start of the 4 float32 bytes.
    """

    template: np.ndarray
    fixed: np.ndarray
    step: tuple[int, int]
    tag: tuple[int, int]
    value: int

    @classmethod
    def learn(cls, data: bytes) -> ScalarTemplate | None:
        """The template of the record `data`, or `None` if it is not a canonical float32 scalar."""
        try:
            event = event_pb2.Event.FromString(data)
            if event.SerializeToString() != data or data[:1] != b"\x09" or data[9:10] != b"\x10":
                return None
        except Exception:  # not an Event: the per-record path reports it
            return None
        values = event.summary.value
        if len(values) != 1:
            return None
        tensor = values[0].tensor
        tag = values[0].tag.encode("utf-8")
        if tensor.dtype != _DT_FLOAT or len(tensor.tensor_content) != 4 or not tag:
            return None
        stop = _STEP_KEY + 1
        while stop < len(data) and data[stop] & 0x80:
            stop += 1
        stop += 1
        probe = event_pb2.Event()
        probe.CopyFrom(event)
        probe.summary.value[0].tensor.tensor_content = bytes(b ^ 0xFF for b in tensor.tensor_content)
        value_at = _changed(data, probe.SerializeToString())
        changed = []
        for letter in "xy":
            probe.CopyFrom(event)
            probe.summary.value[0].tag = letter * len(tag)
            changed.append(_changed(data, probe.SerializeToString()))
        tag_at = np.union1d(*changed)
        if (len(value_at) != 4 or value_at[-1] - value_at[0] != 3
                or len(tag_at) != len(tag) or tag_at[-1] - tag_at[0] != len(tag) - 1):
            return None
        fixed = np.ones(len(data), dtype=bool)
        fixed[_WALL] = False
        fixed[_STEP_KEY + 1 : stop] = False
        fixed[tag_at[0] : tag_at[-1] + 1] = False
        fixed[value_at[0] : value_at[0] + 4] = False
        return cls(np.frombuffer(data, np.uint8), fixed, (_STEP_KEY + 1, stop),
                   (int(tag_at[0]), int(tag_at[-1]) + 1), int(value_at[0]))

    def match(self, rows: np.ndarray) -> int:
        """How many leading rows of `rows` (`uint8 [n, length]`) parse as this template."""
        if rows.shape[1] != len(self.template):
            return 0
        ok = (rows[:, self.fixed] == self.template[self.fixed]).all(axis=1)
        varint = rows[:, self.step[0] : self.step[1]]
        ok &= (varint[:, :-1] >= 0x80).all(axis=1) & (varint[:, -1] < 0x80)
        return len(ok) if ok.all() else int(np.argmin(ok))

    def decode(self, rows: np.ndarray):
        """`(steps int64, walls float64, values float64, tags)` of matching rows.

        `tags` holds each row's tag bytes, `uint8 [n, width]` (see `factorize`).
        """
        walls = np.ascontiguousarray(rows[:, _WALL]).view("<f8").ravel()
        varint = rows[:, self.step[0] : self.step[1]].astype(np.uint64) & np.uint64(0x7F)
        steps = np.zeros(len(rows), dtype=np.uint64)
        for i in range(varint.shape[1]):  # protobuf keeps the low 64 bits
            steps |= varint[:, i] << np.uint64(7 * i)
        start = self.value
        values = np.ascontiguousarray(rows[:, start : start + 4]).view("<f4").ravel()
        tags = rows[:, self.tag[0] : self.tag[1]]
        return steps.view(np.int64), walls.astype(np.float64), values.astype(np.float64), tags
