"""Reading a quarantine's `.npz` files within bounds: no bomb, no pickle, no raw traceback.

tfguard writes `batch.npz` and `weights.npz` with `numpy.savez`: stored,
not compressed, so each file holds exactly the bytes its arrays need, and
`meta.json` declares each array's dtype and shape (`layout`). A file that is
read back is checked before anything is inflated:

1. it must be a whole zip archive (a file cut short by a killed writer is
   refused, not a `zipfile.BadZipFile` traceback);
2. each member's `.npy` header (read alone, a few hundred bytes) gives the
   dtype and shape; object dtypes (pickle) are refused;
3. the bytes the headers declare, and the bytes the archive says its
   members inflate to, may not exceed the file's size on disk
   (`inflation_limit`): a 3.9 MB file that inflates to 4 GB, or a header
   claiming 10^12 elements, is refused before any allocation;
4. when `meta.json` declares the layout, headers and declaration must
   agree, array by array.

Only then is each array read, in chunks, into an array of the size checked.
Every refusal is one `QuarantineError` naming the file, what was found and
what was expected.

Example:

>>> import os, tempfile, numpy as np
>>> path = os.path.join(tempfile.mkdtemp(), "batch.npz")
>>> np.savez(path, **{"x::": np.ones((2, 3), "float32")})
>>> layout = {"x::": {"dtype": "<f4", "shape": [2, 3]}}
>>> read_arrays(path, layout)["x::"].shape
(2, 3)
>>> read_arrays(path, {"x::": {"dtype": "<f4", "shape": [2, 4]}})
Traceback (most recent call last):
...
tfguard._errors.QuarantineError: Received an array file .../batch.npz that does not match meta.json: 'x::' is <f4 (2, 3) in the file, expected <f4 (2, 4) as meta.json declares.
Try: the quarantine folder is damaged or crafted; take the batch from a fresh violation
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib

import numpy as np

from tfguard._errors import QuarantineError

SLACK_BYTES = 64 * 1024
"""What a file may inflate to beyond its size on disk (an empty archive's own records)."""

MAX_HEADER_BYTES = 10_000
"""The largest `.npy` header read (numpy's own default limit)."""

_HINT = "the quarantine folder is damaged or crafted; take the batch from a fresh violation"
_READ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error,
                NotImplementedError, RuntimeError)


def inflation_limit(path: str) -> int:
    """The most bytes a quarantine array file may inflate to: its size on disk, plus `SLACK_BYTES`.

    tfguard stores arrays uncompressed, so a file it wrote never inflates
    beyond its own size.
    """
    return os.path.getsize(path) + SLACK_BYTES


def array_layout(arrays: dict) -> dict:
    """What `meta.json` declares for an `.npz` file: name -> `{"dtype", "shape"}`."""
    return {name: {"dtype": np.asarray(a).dtype.str, "shape": list(np.shape(a))}
            for name, a in arrays.items()}


def _describe(dtype, shape) -> str:
    return f"{dtype} {tuple(int(n) for n in shape)}"


def _header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: str):
    with archive.open(info) as handle:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(
                handle, max_header_size=MAX_HEADER_BYTES)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(
                handle, max_header_size=MAX_HEADER_BYTES)
        else:  # pragma: no cover - read_magic refuses other versions already
            raise ValueError(f"unknown .npy version {version}")
    if dtype.hasobject:
        raise QuarantineError(
            f"Received an array file {path} whose member {info.filename!r} holds Python objects "
            f"(dtype {dtype}), expected plain numeric arrays (no pickled objects).", hint=_HINT)
    return tuple(shape), fortran, dtype


def read_arrays(path: str, layout: dict | None = None) -> dict[str, np.ndarray]:
    """Reads every array of an `.npz` file after checking its sizes (see the module docstring).

    Args:
        path: the `.npz` file.
        layout: name -> `{"dtype", "shape"}` as `meta.json` declares it, or
            `None` for a quarantine written before tfguard declared it (the
            size bound still holds). Defaults to `None`.

    Returns:
        name -> array, in the archive's order.

    Raises:
        QuarantineError: for a damaged or truncated archive, object arrays,
            a header that declares more than the file can hold, or headers
            that disagree with `layout`.
    """
    limit = inflation_limit(path)
    try:
        with zipfile.ZipFile(path) as archive:
            members = [i for i in archive.infolist() if not i.is_dir()]
            inflated = sum(i.file_size for i in members)
            headers, declared = {}, 0
            for info in members:
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                shape, fortran, dtype = _header(archive, info, path)
                size = math.prod(shape) * dtype.itemsize
                if size > info.file_size:
                    raise QuarantineError(
                        f"Received an array file {path} whose member {info.filename!r} declares "
                        f"{_describe(dtype.str, shape)} ({size:,} bytes) but holds "
                        f"{info.file_size:,} bytes, expected a header that matches its data.",
                        hint=_HINT)
                declared += size
                headers[name] = (info, shape, fortran, dtype)
            if max(inflated, declared) > limit:
                raise QuarantineError(
                    f"Received an array file {path} that would inflate to "
                    f"{max(inflated, declared):,} bytes, more than its {limit - SLACK_BYTES:,} "
                    "bytes on disk allow; refused before reading (tfguard stores arrays "
                    "uncompressed, so a file it wrote never inflates beyond its size: this one "
                    "is a compression bomb or its headers lie).", hint=_HINT)
            if layout is not None:
                _check_layout(path, headers, layout)
            return {name: _read_member(archive, info) for name, (info, *_rest) in headers.items()}
    except QuarantineError:
        raise
    except _READ_ERRORS as error:
        raise QuarantineError(
            f"Received an unreadable array file {path}: {type(error).__name__}: {error}, expected "
            "a whole .npz archive of plain numeric arrays as tfguard writes (a file cut short "
            "when the process writing it was killed reads like this).", hint=_HINT,
        ) from error


def _check_layout(path: str, headers: dict, layout: dict) -> None:
    if not isinstance(layout, dict) or set(layout) != set(headers):
        found = sorted(headers)
        expected = sorted(layout) if isinstance(layout, dict) else layout
        raise QuarantineError(
            f"Received an array file {path} that does not match meta.json: it holds arrays "
            f"{found[:8]}{'...' if len(found) > 8 else ''}, expected "
            f"{expected[:8] if isinstance(expected, list) else expected!r} as meta.json declares.",
            hint=_HINT)
    for name, (_info, shape, _fortran, dtype) in headers.items():
        entry = layout[name] if isinstance(layout[name], dict) else {}
        want_dtype, want_shape = str(entry.get("dtype")), entry.get("shape")
        if dtype.str != want_dtype or not isinstance(want_shape, list) or list(shape) != want_shape:
            raise QuarantineError(
                f"Received an array file {path} that does not match meta.json: {name!r} is "
                f"{_describe(dtype.str, shape)} in the file, expected "
                f"{want_dtype} {tuple(want_shape) if isinstance(want_shape, list) else want_shape}"
                " as meta.json declares.", hint=_HINT)


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    with archive.open(info) as handle:  # zipfile stops at the member's size and checks its CRC
        return np.lib.format.read_array(handle, allow_pickle=False,
                                        max_header_size=MAX_HEADER_BYTES)


__all__ = ["MAX_HEADER_BYTES", "SLACK_BYTES", "array_layout", "inflation_limit", "read_arrays"]
