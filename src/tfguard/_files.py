"""Where tfguard's files go: whole-file writes that never leave a half-written file, and new folders.

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

A new folder beside others of the same name (a second run of a script, a
second trial of one remedy, a batch quarantined twice) is named by
`unique_path`: `name`, then `name-2`, `name-3`, ...

>>> root = os.path.dirname(path)
>>> [os.path.basename(unique_path(root, "run", create=True)) for _ in range(3)]
['run', 'run-2', 'run-3']
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


def unique_path(root: str | os.PathLike, name: str, *, create: bool = False) -> str:
    """`root/name`, or `root/name-2`, `root/name-3`, ...: the first that does not exist yet.

    Args:
        root: the folder the new path goes in.
        name: the name wanted.
        create: create the folder (and `root`) too; a folder another
            process creates meanwhile is passed over, so two writers never
            share one. Defaults to `False` (only the name is chosen).

    Returns:
        The path, as a string.

    Raises:
        OSError: when `create` is true and the folder cannot be made.
    """
    root = os.fspath(root)
    path, n = os.path.join(root, name), 2
    while True:
        if create:
            try:
                os.makedirs(path)
                return path
            except FileExistsError:
                pass
        elif not os.path.exists(path):
            return path
        path, n = os.path.join(root, f"{name}-{n}"), n + 1


__all__ = ["unique_path", "write_atomic"]
