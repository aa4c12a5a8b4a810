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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import google_crc32c

from tfguard.events._blocks import MIN_BLOCK, Block, find_block

__all__ = ["Damage", "frame_record", "iter_record_blocks", "iter_records", "masked_crc32c"]

_CHUNK_SIZE = 1 << 20
MAX_RECORD_BYTES = 128 << 20
"""The largest record `iter_records` keeps in memory by default (128 MiB).

A record is one `Event`: a scalar is ~50 bytes, a histogram or an image a
few KB to a few MB. A length field above this cap is never allocated: the
record is skipped (its CRC is still checked, streamed through a chunk) and
reported as `Damage` of kind `"oversized"`, so memory stays within about
one chunk plus this cap whatever a file claims.
"""
_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_HEADER_CACHE_LIMIT = 4096
KINDS = ("truncated", "corrupt", "oversized", "unreadable")


@dataclass(frozen=True)
class Damage:
    """One place where an event file could not be read as written.

    Args:
        path: the event file.
        offset: byte offset of the start of the bad record in that file.
        reason: what was wrong there, e.g. `"data crc mismatch"`.
        kind: one of `KINDS`: `"truncated"` (the file ends inside a record
            of a plausible length: what a writer that is still writing, or
            was killed, leaves), `"corrupt"` (a CRC mismatch, an
            undecodable event or value, bytes that are not a record),
            `"oversized"` (a record longer than the cap, skipped) or
            `"unreadable"` (the file cannot be opened or read). Every kind
            but `"truncated"` means data was lost. Defaults to `"corrupt"`.
    """

    path: str
    offset: int
    reason: str
    kind: str = "corrupt"

    @property
    def lost_data(self) -> bool:
        """Whether records were lost or refused here (any kind but `"truncated"`)."""
        return self.kind != "truncated"


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
    path: str,
    damage: list[Damage],
    *,
    chunk_size: int = _CHUNK_SIZE,
    max_record_bytes: int = MAX_RECORD_BYTES,
) -> Iterator[tuple[list[int], list[bytes]]]:
    """Yield the intact records of one event file, a chunk's worth at a time.

    Records are yielded as two parallel lists, offsets and data, so the
    caller's loop, not a generator switch, runs once per record. Both lists are
    emptied when the next chunk is asked for (so a chunk's bytes are freed
    before the next one is read): copy what you keep. Damage never raises: it is
    appended to `damage` and reading stops at the first record whose length
    cannot be trusted (a length CRC mismatch, a length past the end of the file,
    a cut header). A data CRC mismatch skips only that record; so does a
    record longer than `max_record_bytes`, which is never held in memory.
    A record larger than a chunk is read into one buffer of its own size
    (handed over as a `bytearray`), never copied a second time.

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
        max_record_bytes: the longest record kept; a longer one is skipped
            and reported. Defaults to `MAX_RECORD_BYTES` (128 MiB).

    Yields:
        `(offsets, datas)`: the byte offset of each record and its data, in file order.
    """
    for item in iter_record_blocks(
        path, damage, chunk_size=chunk_size, max_record_bytes=max_record_bytes
    ):
        yield item.records() if isinstance(item, Block) else item


def iter_record_blocks(
    path: str,
    damage: list[Damage],
    *,
    chunk_size: int = _CHUNK_SIZE,
    max_record_bytes: int = MAX_RECORD_BYTES,
    start: int = 0,
    opener: Callable[[str], BinaryIO] | None = None,
) -> Iterator[tuple[list[int], list[bytes]] | Block]:
    """`iter_records`, with runs of same-length records as `tfguard.events._blocks.Block`s.

    A run of at least `MIN_BLOCK` records with the same header (what
    `tf.summary.scalar` writes, step after step) is framed and CRC-checked
    in one numpy step and yielded as one `Block` (its rows are a view of the
    chunk: copy what you keep). Everything else is as `iter_records`.

    Reading may start at a record boundary other than the file's start
    (`start`: what a follower of a growing file read up to last time);
    offsets in records and `Damage` stay offsets in the whole file.

    Example:

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.tfevents")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(frame_record(b"a") + frame_record(b"bc"))
    >>> [(list(offsets), list(datas)) for offsets, datas in iter_record_blocks(path, [], start=17)]
    [([17], [b'bc'])]

    Args:
        path: the event file to read.
        damage: list that receives one `Damage` per bad spot found.
        chunk_size: bytes read from the file at a time. Defaults to `1 MiB`.
        max_record_bytes: the longest record kept. Defaults to `MAX_RECORD_BYTES`.
        start: the file offset of the first record to read (a record
            boundary). Defaults to `0`.
        opener: `opener(path)` returns the file opened for unbuffered binary
            reading (e.g. one that counts the bytes read). Defaults to
            `None` (`open(path, "rb", buffering=0)`).

    Yields:
        `(offsets, datas)` lists, or a `Block`, in file order.
    """
    try:
        f = open(path, "rb", buffering=0) if opener is None else opener(path)  # noqa: SIM115
    except OSError as err:
        damage.append(Damage(path, start, f"cannot open: {err.strerror or err}", "unreadable"))
        return
    try:
        if start:
            f.seek(start)
        yield from _scan(f, path, damage, max(64, int(chunk_size)), max(0, int(max_record_bytes)),
                         max(0, int(start)))
    except OSError as err:
        damage.append(Damage(path, f.tell() if not f.closed else 0,
                             f"read error: {err.strerror or err}", "unreadable"))
    finally:
        f.close()


def _scan(
    f, path: str, damage: list[Damage], chunk_size: int, max_record: int, begin: int = 0
) -> Iterator[tuple[list[int], list[bytes]] | Block]:
    """The framing loop of `iter_records` over an open, unbuffered file positioned at `begin`."""
    size = os.fstat(f.fileno()).st_size
    crc = google_crc32c.value
    unpack_header = _HEADER.unpack
    unpack_u32 = _U32.unpack_from
    verified: dict[bytes, int] = {}  # header bytes already checked -> length
    buf = f.read(chunk_size)
    base = begin  # file offset of buf[0]
    pos = 0
    while True:
        n = len(buf)
        offsets: list[int] = []
        datas: list[bytes] = []
        add_offset, add_data = offsets.append, datas.append
        need = 0
        length = 0
        previous = None
        next_try = 0  # where a run of same headers is looked for again after a miss
        while pos + 12 <= n:
            header = buf[pos : pos + 12]
            length = verified.get(header)
            if header == previous and length is not None and pos >= next_try:
                block = find_block(buf, pos, base, header, length)
                if block is None:
                    next_try = pos + MIN_BLOCK * (length + 16)
                else:
                    if datas:
                        yield offsets, datas
                        offsets.clear()
                        datas.clear()
                    damage.extend(Damage(path, offset, "data crc mismatch") for offset in block.bad)
                    yield block
                    pos += (len(block.offsets) + len(block.bad)) * (length + 16)
                    previous = None
                    del block
                    continue
            previous = header
            if length is None:
                length, length_crc = unpack_header(header)
                c = crc(header[:8])
                if (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF != length_crc:
                    if datas:
                        yield offsets, datas
                    damage.append(Damage(path, base + pos, _bad_header(base + pos, header)))
                    return
                if length > max_record:
                    need = 1  # handled below, like a record that runs past the chunk
                    break
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
        if need:
            start = base + pos  # file offset of the record that does not fit
            record_end = start + 12 + length + 4
            if record_end > size:
                size = os.fstat(f.fileno()).st_size  # the file may have grown
            if record_end > size:
                cap = f" (over the {max_record}-byte record cap)" if length > max_record else ""
                damage.append(Damage(
                    path, start,
                    f"truncated record: length {length} needs {record_end - start} bytes, "
                    f"{size - start} left in the file{cap}",
                    "truncated" if length <= max_record else "corrupt"))
                return
            if length > max_record:  # never allocated, never read: skipped by a seek
                damage.append(Damage(
                    path, start,
                    f"record too large: its length field says {length} bytes, over the "
                    f"{max_record}-byte record cap; skipped unread", "oversized"))
                f.seek(record_end)
            elif 16 + length > chunk_size:  # read into one buffer of its own size
                have = buf[pos + 12 :]
                buf = b""
                record = _read_large(f, path, damage, start, length, have, chunk_size)
                del have
                if record is None and damage[-1].kind == "truncated":
                    return
                if record is not None:
                    yield [start], [record]
                    del record
            if length > max_record or 16 + length > chunk_size:
                buf = b""
                buf = f.read(chunk_size)
                base, pos = record_end, 0
                if not buf:
                    return
                continue
        more = f.read(max(chunk_size, need))
        if not more:
            if pos < n:
                damage.append(Damage(
                    path, base + pos, f"truncated record: {n - pos} trailing bytes", "truncated"))
            return
        rest = buf[pos:]
        buf = b""  # never hold the old and the new chunk together
        buf = rest + more if rest else more
        del rest, more
        base += pos
        pos = 0


def _bad_header(offset: int, header: bytes) -> str:
    """The reason for a record header whose length CRC does not match."""
    if offset:
        return "length crc mismatch"
    what = "all zero bytes" if not any(header) else "not a record header"
    return (f"length crc mismatch: the file is damaged from its first byte ({what}); "
            f"expected a TFRecord-framed event file as tf.summary writes")


def _read_large(
    f, path: str, damage: list[Damage], start: int, length: int, have: bytes, chunk_size: int
) -> bytearray | None:
    """Reads the record at `start` whose data does not fit in a chunk.

    `have` holds the bytes after its header already read. The data goes
    into one `bytearray` of its size (the only copy), its CRC computed piece
    by piece. Returns the data when it is intact, else `None` (damage
    appended; a `"truncated"` one when the file ended inside the record).
    """
    data = bytearray(length)
    crc = google_crc32c.extend
    got = min(len(have), length)
    checksum = crc(0, have[:got]) if got else 0
    data[:got] = have[:got]
    trailer = have[got:]
    while got < length:
        piece = f.read(min(length - got, chunk_size))
        if not piece:
            damage.append(Damage(path, start, f"truncated record: length {length}, only "
                                              f"{got} data bytes in the file", "truncated"))
            return None
        checksum = crc(checksum, piece)
        data[got : got + len(piece)] = piece
        got += len(piece)
        del piece
    while len(trailer) < 4:
        piece = f.read(4 - len(trailer))
        if not piece:
            damage.append(Damage(path, start, f"truncated record: length {length}, "
                                              "its data crc is cut", "truncated"))
            return None
        trailer += piece
    masked = (((checksum >> 15) | (checksum << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    if masked != _U32.unpack(trailer)[0]:
        damage.append(Damage(path, start, "data crc mismatch"))
        return None
    return data
