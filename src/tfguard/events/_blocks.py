"""Runs of same-length records, framed and CRC-checked with numpy instead of one by one.

`tf.summary.scalar` writes one record per value, and the records of a run of
scalars often have the same length: same header, same length, one after the
other. `find_block` takes such a run from a chunk in one numpy step: it
checks that every record's 12-byte header is the run's (a header already
checked with its CRC), and checks every record's data CRC at once:
CRC32C is affine over GF(2), so for data of a fixed length `L`,

    crc(d) = crc(0 ... 0) XOR T[0][d[0]] XOR T[1][d[1]] XOR ... XOR T[L-1][d[L-1]]

with one 256-entry table per byte position (`crc_tables`), built once per
length from `google_crc32c` itself. A `Block` holds the intact records of
the run as the rows of a 2-D array (a view of the chunk, no copy when all
are intact); records whose data CRC fails are left out, their offsets in
`Block.bad`.

Example:

>>> from tfguard.events._records import frame_record
>>> blob = b"".join(frame_record(bytes([i]) * 5) for i in range(80))
>>> block = find_block(blob, 0, 0, blob[:12], 5)
>>> block.rows.shape, block.offsets[:3].tolist(), block.bad
((80, 5), [0, 21, 42], [])
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import google_crc32c
import numpy as np

__all__ = ["MIN_BLOCK", "Block", "crc_tables", "find_block", "masked_crc32c_rows"]

MIN_BLOCK = 64
"""The fewest records worth a numpy step; shorter runs are read one by one."""
MAX_BLOCK_LENGTH = 4096
"""The longest record data taken in blocks (longer records are few and CRC'd by `google_crc32c`)."""


@dataclass(frozen=True)
class Block:
    """Intact records of the same length, in file order.

    Args:
        offsets: `int64` file offset of each record's start.
        rows: `uint8` array `[records, length]`: each record's data.
        bad: the offsets of the run's records whose data CRC failed (left out).
    """

    offsets: np.ndarray
    rows: np.ndarray
    bad: list

    def records(self) -> tuple[list[int], list[bytes]]:
        """The records as the parallel lists `iter_records` yields."""
        return self.offsets.tolist(), [row.tobytes() for row in self.rows]


@lru_cache(maxsize=32)
def crc_tables(length: int) -> tuple[int, np.ndarray]:
    """`(crc of `length` zero bytes, T)` with `T[j][b]` the CRC change of byte `j` set to `b`.

    Args:
        length: the data length.

    Returns:
        The CRC32C (unmasked) of zeros and the `[length, 256]` `uint32` tables.
    """
    zeros = bytearray(length)
    base = google_crc32c.value(bytes(zeros))
    tables = np.empty((length, 256), dtype=np.uint32)
    for j in range(length):
        for b in range(256):
            zeros[j] = b
            tables[j, b] = google_crc32c.value(bytes(zeros)) ^ base
        zeros[j] = 0
    return base, tables


def masked_crc32c_rows(rows: np.ndarray) -> np.ndarray:
    """The masked CRC32C of every row of a `uint8` array `[n, length]`, as `uint32`.

    Example:

    >>> from tfguard.events._records import masked_crc32c
    >>> rows = np.frombuffer(b"abcdefgh", np.uint8).reshape(2, 4)
    >>> masked_crc32c_rows(rows).tolist() == [masked_crc32c(b"abcd"), masked_crc32c(b"efgh")]
    True
    """
    base, tables = crc_tables(rows.shape[1])
    if not len(rows):
        return np.zeros(0, np.uint32)
    same = (rows == rows[0]).all(axis=0)  # a byte every row shares adds the same to each CRC
    fixed = np.flatnonzero(same)
    start = np.uint32(base)
    if fixed.size:
        start ^= np.bitwise_xor.reduce(tables[fixed, rows[0, fixed]])
    acc = np.full(rows.shape[0], start, dtype=np.uint32)
    varying = np.flatnonzero(~same)
    columns = np.ascontiguousarray(rows[:, varying].T)
    for column, j in zip(columns, varying.tolist(), strict=True):
        acc ^= tables[j].take(column)
    return ((acc >> 15) | (acc << 17)) + np.uint32(0xA282EAD8)


def find_block(buf: bytes, pos: int, base: int, header: bytes, length: int) -> Block | None:
    """The run of records at `buf[pos:]` that all have `header`, or `None` if shorter than `MIN_BLOCK`.

    Args:
        buf: the chunk.
        pos: where the run's first record starts in `buf`; its header is `header`.
        base: the file offset of `buf[0]`.
        header: the 12 checked header bytes (length and its CRC).
        length: the data length that header says.

    Returns:
        The `Block` of the run's intact records (it may be empty), or `None`.
    """
    size = length + 16
    count = (len(buf) - pos) // size
    if count < MIN_BLOCK or not 0 < length <= MAX_BLOCK_LENGTH:
        return None
    frames = np.frombuffer(buf, np.uint8, count * size, pos).reshape(count, size)
    same = (frames[:, :12] == np.frombuffer(header, np.uint8)).all(axis=1)
    if not same.all():
        count = int(np.argmin(same))
        if count < MIN_BLOCK:
            return None
        frames = frames[:count]
    rows = frames[:, 12 : 12 + length]
    stored = np.ascontiguousarray(frames[:, 12 + length :]).view("<u4").ravel()
    good = masked_crc32c_rows(rows) == stored
    offsets = base + pos + size * np.arange(count, dtype=np.int64)
    if good.all():
        return Block(offsets, rows, [])
    return Block(offsets[good], rows[good], offsets[~good].tolist())
