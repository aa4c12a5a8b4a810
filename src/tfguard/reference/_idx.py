"""The idx file format of MNIST and Fashion-MNIST, gzip-compressed.

An idx file is a big-endian header followed by raw values: two zero bytes,
one type byte (`0x08` = unsigned byte), one byte giving the number of
dimensions, then one 32-bit size per dimension. Labels are `idx1` (magic
2049), images `idx3` (magic 2051).

`read_idx` checks the header against the file size, so a truncated or
mislabelled file is reported with its name instead of a reshape error.
`write_idx` writes the same format (used by tests and by people who convert
their own data).

Example:

>>> import numpy as np, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "labels-idx1-ubyte.gz")
>>> write_idx(path, np.array([3, 1, 4], np.uint8))
>>> read_idx(path).tolist()
[3, 1, 4]
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import numpy as np

from tfguard._errors import DataError

UBYTE = 0x08


def read_idx(path: str | os.PathLike, *, ndim: int | None = None) -> np.ndarray:
    """Reads one gzip-compressed idx file of unsigned bytes.

    Args:
        path: the `.gz` file.
        ndim: the number of dimensions the file must have (1 for labels, 3
            for images), or `None` to accept any. Defaults to `None`.

    Returns:
        A read-only `uint8` array with the shape the header declares.

    Raises:
        DataError: the file cannot be read, is not gzip, or its header does
            not match its contents.
    """
    path = os.fspath(path)
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(
            f"Could not read the idx file {path!r}: {e}. Expected a gzip-compressed idx file.",
            hint="download the file again; it may be truncated or not gzip-compressed.",
        ) from e
    if len(data) < 4:
        raise DataError(
            f"The idx file {path!r} is too short ({len(data)} bytes) to hold a header.",
            hint="download the file again.",
        )
    zero, dtype, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != UBYTE or dims == 0:
        raise DataError(
            f"The idx file {path!r} has an invalid header, expected magic 0x0000 0x08 "
            f"followed by the number of dimensions. Received: bytes={data[:4].hex()}",
            hint="check that this is an idx file of unsigned bytes (e.g. *-idx3-ubyte.gz).",
        )
    if ndim is not None and dims != ndim:
        raise DataError(
            f"The idx file {path!r} has {dims} dimension(s), expected {ndim}. "
            f"Received: magic={2048 + dims}",
            hint="the label and image files may be swapped.",
        )
    offset = 4 + 4 * dims
    if len(data) < offset:
        raise DataError(f"The idx file {path!r} is truncated inside its header.")
    shape = struct.unpack(f">{dims}I", data[4:offset])
    expected = int(np.prod(shape, dtype=np.int64))
    if len(data) - offset != expected:
        raise DataError(
            f"The idx file {path!r} declares shape {tuple(shape)} ({expected} values) but "
            f"holds {len(data) - offset} values.",
            hint="download the file again; it is truncated or corrupted.",
        )
    return np.frombuffer(data, np.uint8, offset=offset).reshape(shape)


def write_idx(path: str | os.PathLike, array: np.ndarray) -> None:
    """Writes a `uint8` array as one gzip-compressed idx file.

    Args:
        path: the `.gz` file to write.
        array: the values; converted to `uint8` (values must fit).

    Raises:
        DataError: the values do not fit in `uint8`.
    """
    array = np.asarray(array)
    if array.size and (array.min() < 0 or array.max() > 255):
        raise DataError(
            "Received values outside [0, 255] for an idx ubyte file. "
            f"Received: min={array.min()}, max={array.max()}"
        )
    header = struct.pack(">HBB", 0, UBYTE, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(os.fspath(path), "wb") as f:
        f.write(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())
