"""Whole-file writes that never leave a half-written file: a temporary file, then `os.replace`.

Every file tfguard writes whole (the HTML and JSON reports, a quarantine's
`meta.json` and `replay.json`, the projector's config and tables, a run's
`config.json`) goes through `write_atomic`. The text is written to a
temporary file in the same folder (same file system, so the rename is
atomic), flushed and synced, then renamed over the target. A process killed
mid-write (SIGKILL, a full disk, a file-size limit) leaves the old file as
it was, or no file, and at worst a stray `.<name>.*.tmp` beside it, never a
truncated report. An error removes the temporary file and is re-raised.

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "report.json")
>>> write_atomic(path, '{"ok": true}\\n') == path
True
>>> open(path).read()
'{"ok": true}\\n'
>>> sorted(os.listdir(os.path.dirname(path)))
['report.json']
"""

from __future__ import annotations

import contextlib
import os
import tempfile


def write_atomic(path: str | os.PathLike, data: str | bytes, *, encoding: str = "utf-8") -> str:
    """Writes `data` to `path` all at once: the old file stays whole until the new one is.

    Args:
        path: the file to create or replace; its folder is created if missing.
        data: the whole content: `str` (encoded with `encoding`) or `bytes`.
        encoding: the text encoding. Defaults to `"utf-8"`.

    Returns:
        `path`, as a string.

    Raises:
        OSError: when the folder or the file cannot be written (permissions,
            a full disk, a file-size limit); `path` is then as it was.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    payload = data.encode(encoding) if isinstance(data, str) else bytes(data)
    handle, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                         dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(OSError):  # mkstemp makes 0600; give the file the usual mode
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path


__all__ = ["write_atomic"]
