"""TFRecord framing of tfevents files, checked with CRC32C, read in bounded chunks.

A tfevents file is a sequence of records, each framed as

    uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)

(all little-endian). `iter_records` walks that framing without ever trusting a
length it has not checked: a length whose CRC does not match, or that runs past
the end of the file, stops the file and is reported as a `Damage`; a record
whose data CRC does not match is reported and skipped (its length was checked,
so the framing stays in step). The file is read in chunks, so memory holds one
chunk (or one record, when a record is larger) however large the file is.

Example:

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "x.tfevents")
>>> with open(path, "wb") as f:
...     _ = f.write(frame_record(b"hello") + frame_record(b"world")[:-1])
>>> damage = []
>>> [data for _, datas in iter_records(path, damage) for data in datas]
[b'hello']
>>> damage[0].offset, damage[0].reason.split(":")[0]
(21, 'truncated record')
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import google_crc32c

__all__ = ["Damage", "frame_record", "iter_records", "masked_crc32c"]

_CHUNK_SIZE = 1 << 20
_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_HEADER_CACHE_LIMIT = 4096


@dataclass(frozen=True)
class Damage:
    """One place where an event file could not be read as written.

    Args:
        path: the event file.
        offset: byte offset of the start of the bad record in that file.
        reason: what was wrong there, e.g. `"data crc mismatch"`.
    """

    path: str
    offset: int
    reason: str


def masked_crc32c(data: bytes) -> int:
    """Return the masked CRC32C that TFRecord framing stores for `data`.

    Example:

    >>> masked_crc32c(b"")
    2726488792

    Args:
        data: the bytes to checksum.

    Returns:
        The CRC32C of `data`, rotated right by 15 bits plus `0xA282EAD8`, mod 2**32.
    """
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """Frame `data` as one TFRecord (length, length CRC, data, data CRC).

    Example:

    >>> len(frame_record(b"abc"))
    19

    Args:
        data: the serialized payload, usually an `Event` proto.

    Returns:
        The framed bytes, ready to append to a tfevents file.
    """
    header = _U64.pack(len(data))
    return header + _U32.pack(masked_crc32c(header)) + data + _U32.pack(masked_crc32c(data))


def iter_records(
    path: str, damage: list[Damage], *, chunk_size: int = _CHUNK_SIZE
) -> Iterator[tuple[list[int], list[bytes]]]:
    """Yield the intact records of one event file, a chunk's worth at a time.

    Records are yielded as two parallel lists, offsets and data, so the
    caller's loop, not a generator switch, runs once per record. Both lists are
    emptied when the next chunk is asked for (so a chunk's bytes are freed
    before the next one is read): copy what you keep. Damage never raises: it is
    appended to `damage` and reading stops at the first record whose length
    cannot be trusted (a length CRC mismatch, a length past the end of the file,
    a cut header). A data CRC mismatch skips only that record.

    Example:

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.tfevents")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(frame_record(b"a") + frame_record(b"bc"))
    >>> [(list(offsets), list(datas)) for offsets, datas in iter_records(path, [])]
    [([0, 17], [b'a', b'bc'])]

    Args:
        path: the event file to read.
        damage: list that receives one `Damage` per bad spot found.
        chunk_size: bytes read from the file at a time. Defaults to `1 MiB`.

    Yields:
        `(offsets, datas)`: the byte offset of each record and its data, in file order.
    """
    try:
        f = open(path, "rb", buffering=0)  # noqa: SIM115 - closed in finally
    except OSError as err:
        damage.append(Damage(path, 0, f"cannot open: {err.strerror or err}"))
        return
    try:
        yield from _scan(f, path, damage, max(64, int(chunk_size)))
    except OSError as err:
        damage.append(Damage(path, 0, f"read error: {err.strerror or err}"))
    finally:
        f.close()


def _scan(
    f, path: str, damage: list[Damage], chunk_size: int
) -> Iterator[tuple[list[int], list[bytes]]]:
    """The framing loop of `iter_records` over an open, unbuffered file."""
    size = os.fstat(f.fileno()).st_size
    crc = google_crc32c.value
    unpack_header = _HEADER.unpack
    unpack_u32 = _U32.unpack_from
    verified: dict[bytes, int] = {}  # header bytes already checked -> length
    buf = f.read(chunk_size)
    base = 0  # file offset of buf[0]
    pos = 0
    while True:
        n = len(buf)
        offsets: list[int] = []
        datas: list[bytes] = []
        add_offset, add_data = offsets.append, datas.append
        need = 0
        while pos + 12 <= n:
            header = buf[pos : pos + 12]
            length = verified.get(header)
            if length is None:
                length, length_crc = unpack_header(header)
                c = crc(header[:8])
                if (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF != length_crc:
                    if datas:
                        yield offsets, datas
                    damage.append(Damage(path, base + pos, "length crc mismatch"))
                    return
                if len(verified) >= _HEADER_CACHE_LIMIT:
                    verified.clear()
                verified[header] = length
            end = pos + 12 + length
            if end + 4 > n:
                need = end + 4 - n
                break
            data = buf[pos + 12 : end]
            c = crc(data)
            if (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF == unpack_u32(buf, end)[0]:
                add_offset(base + pos)
                add_data(data)
            else:
                damage.append(Damage(path, base + pos, "data crc mismatch"))
            pos = end + 4
        if datas:
            yield offsets, datas
            offsets.clear()  # the caller is done with them: free the slices
            datas.clear()
        record_end = base + n + need  # file offset the pending record needs
        if need and record_end > size:
            size = os.fstat(f.fileno()).st_size  # the file may have grown
            if record_end > size:
                length = _U64.unpack_from(buf, pos)[0]
                damage.append(
                    Damage(
                        path,
                        base + pos,
                        f"truncated record: length {length} needs {record_end - base - pos} "
                        f"bytes, {size - base - pos} left in the file",
                    )
                )
                return
        more = f.read(max(chunk_size, need))
        if not more:
            if pos < n:
                damage.append(
                    Damage(path, base + pos, f"truncated record: {n - pos} trailing bytes")
                )
            return
        rest = buf[pos:]
        buf = b""  # never hold the old and the new chunk together
        buf = rest + more if rest else more
        del rest, more
        base += pos
        pos = 0
