"""Run directories: `root/<model_name>/<k1_v1_k2_v2...>_<YYYYmmdd-HHMMSS>`.

One run is one directory; every tag of a run goes into it, so TensorBoard
lists one run per training and the HParams tab compares runs side by side.
Names come from user input (a model name, hyper-parameter values), so every
path component is sanitized: no `..`, no path separator, no NUL, control
character or newline, a bounded length (a short hash of the original keeps
truncated names distinct), and the final directory is checked with
`os.path.realpath` to lie inside `root`.

Example:

>>> import tempfile, os
>>> root = tempfile.mkdtemp()
>>> path = run_dir(root, "cnn", {"lr": 0.001, "batch": 64})
>>> os.path.relpath(path, root).split(os.sep)[0], os.path.basename(path)[:17]
('cnn', 'batch_64_lr_1e-3_')
>>> format_value(0.5), format_value(3e-4), format_value(True), format_value(1e6)
('0.5', '3e-4', 'true', '1e6')
"""

from __future__ import annotations

import datetime as _datetime
import decimal
import hashlib
import math
import os
import re
import unicodedata
from collections.abc import Mapping

from tfguard._errors import ContractError

MAX_COMPONENT = 120
"""Longest directory name `run_dir` creates, in characters."""

_MAX_BYTES = 240  # below NAME_MAX (255 bytes) on every common file system
_HASH_CHARS = 8
_ALLOWED_PUNCTUATION = set("-._+=@,")
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL"} | {f"{p}{i}" for p in ("COM", "LPT") for i in range(10)}
_MAX_SUFFIX = 10_000


def format_value(value) -> str:
    """Formats one hyper-parameter value compactly for a directory name.

    Floats take the shorter of their plain and scientific forms (`0.001` ->
    `1e-3`, `0.5` -> `0.5`); bools are `true`/`false`; sequences are joined
    with `-`; everything else goes through `str`. The result is not yet
    sanitized (see `sanitize_component`).

    Example:

    >>> [format_value(v) for v in (0.001, 0.25, 1e-05, 100.0, 64, False, "adam", (3, 3))]
    ['1e-3', '0.25', '1e-5', '100', '64', 'false', 'adam', '3-3']

    Args:
        value: a bool, int, float, string, numpy scalar, sequence or any object.

    Returns:
        A short string.
    """
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        value = value.item()  # numpy scalars
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _format_float(value)
    if isinstance(value, (list, tuple)):
        return "-".join(format_value(v) for v in value)
    if value is None:
        return "none"
    return str(value)


def _format_float(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    number = decimal.Decimal(repr(value)).normalize()
    sign, digits, exponent = number.as_tuple()
    mantissa = "".join(str(d) for d in digits)
    power = exponent + len(digits) - 1
    scientific = mantissa[0] + (f".{mantissa[1:]}" if len(mantissa) > 1 else "")
    scientific = ("-" if sign else "") + scientific + (f"e{power}" if power else "")
    plain = format(number, "f")
    if "." in plain:
        plain = plain.rstrip("0").rstrip(".")
    return plain if len(plain) <= len(scientific) else scientific


def sanitize_component(name, *, max_length: int = MAX_COMPONENT, fallback: str = "run") -> str:
    """Turns any string into one safe directory name.

    Letters and digits (any script) and `-._+=@,` are kept; every other
    character (path separators, `..`, NUL, control characters, newlines,
    spaces, `<>:"|?*`) becomes `_`, and so does every run of two or more
    dots (no `..` anywhere). A leading dot becomes `_` (no hidden or
    parent directories), Windows device names get a `_` prefix, and a name
    longer than `max_length` characters (or 240 UTF-8 bytes) is cut and ends
    with `-` and 8 hex digits of the original's SHA-1, so two long names stay
    distinct.

    Example:

    >>> sanitize_component("../etc/passwd"), sanitize_component("<script>"), sanitize_component("")
    ('___etc_passwd', '_script_', 'run')
    >>> len(sanitize_component("x" * 10_000))
    120

    Args:
        name: any value; non-strings go through `str`.
        max_length: the longest result, at least 16. Defaults to `120`.
        fallback: the result for an empty name. Defaults to `"run"`.

    Returns:
        A non-empty name without separators, safe on Linux, macOS and Windows.

    Raises:
        ContractError: if `max_length` is below 16.
    """
    if max_length < 16:
        raise ContractError(
            f"Received an invalid value for `max_length`, expected an integer >= 16. Received: max_length={max_length!r}"
        )
    original = str(name)
    text = unicodedata.normalize("NFC", original)
    cleaned = "".join(c if (c.isalnum() or c in _ALLOWED_PUNCTUATION) else "_" for c in text)
    cleaned = re.sub(r"\.{2,}", lambda match: "_" * len(match.group()), cleaned)
    if cleaned.startswith("."):
        cleaned = "_" + cleaned[1:]
    if not cleaned:
        cleaned = fallback
    if cleaned.split(".")[0].upper() in _WINDOWS_RESERVED:
        cleaned = "_" + cleaned
    if len(cleaned) > max_length or len(cleaned.encode("utf-8")) > _MAX_BYTES:
        digest = hashlib.sha1(original.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
        keep = max_length - _HASH_CHARS - 1
        head = cleaned[:keep]
        while len(head.encode("utf-8")) > _MAX_BYTES - _HASH_CHARS - 1:
            head = head[:-1]
        cleaned = f"{head}-{digest}"
    return cleaned


def hparams_slug(hparams: Mapping | None, *, max_length: int = 96) -> str:
    """`k1_v1_k2_v2...` for the sorted keys of `hparams`, sanitized, or `""`.

    Example:

    >>> hparams_slug({"lr": 0.01, "act": "relu"})
    'act_relu_lr_0.01'
    """
    if not hparams:
        return ""
    parts = []
    for key in sorted(hparams, key=str):
        parts.append(f"{key}_{format_value(hparams[key])}")
    return sanitize_component("_".join(parts), max_length=max_length)


def _inside(path: str, root: str) -> bool:
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def run_dir(root, model_name: str, hparams: Mapping | None = None, *, now=None) -> str:
    """Creates and returns a fresh run directory under `root`.

    The layout is `root/<model_name>/<k1_v1_k2_v2...>_<YYYYmmdd-HHMMSS>` with
    the hyper-parameter keys sorted and values formatted by `format_value`
    (just the timestamp without hyper-parameters). Two runs starting in the
    same second get `-2`, `-3`, ... (the directory is created atomically, so
    concurrent processes cannot share one). Nothing is ever created outside
    `root`: every component is sanitized and the result is checked with
    `realpath` before and after creation (a symlink pointing out is refused).

    Example:

    >>> import tempfile, datetime
    >>> root = tempfile.mkdtemp()
    >>> at = datetime.datetime(2025, 1, 2, 3, 4, 5)
    >>> a = run_dir(root, "m", {"lr": 0.1}, now=at)
    >>> b = run_dir(root, "m", {"lr": 0.1}, now=at)
    >>> os.path.basename(a), os.path.basename(b)
    ('lr_0.1_20250102-030405', 'lr_0.1_20250102-030405-2')

    Args:
        root: the log root (created if missing).
        model_name: usually `model.name`; sanitized.
        hparams: the run's hyper-parameters. Defaults to `None`.
        now: the start time, a `datetime.datetime`. Defaults to `None` (now, local time).

    Returns:
        The path of the new, empty directory (`root` joined with two components).

    Raises:
        ContractError: if `root` is empty, or a component resolves outside
            `root` (a symlink), or no unique name is left.
        OSError: if the directories cannot be created (read-only, disk full).
    """
    root = os.fspath(root)
    if not root:
        raise ContractError("Received an invalid value for `root`, expected a directory path. Received: root=''")
    os.makedirs(root, exist_ok=True)
    model_dir = os.path.join(root, sanitize_component(model_name, fallback="model"))
    os.makedirs(model_dir, exist_ok=True)
    if not _inside(model_dir, root) or not os.path.isdir(model_dir):
        raise ContractError(
            f"Refusing to write logs outside the log root: '{model_dir}' resolves to "
            f"'{os.path.realpath(model_dir)}', expected a directory inside '{os.path.realpath(root)}'."
        )
    stamp = (now or _datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
    slug = hparams_slug(hparams)
    base = f"{slug}_{stamp}" if slug else stamp
    for index in range(1, _MAX_SUFFIX):
        name = base if index == 1 else f"{base}-{index}"
        path = os.path.join(model_dir, name)
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        if not _inside(path, root):  # cannot happen with a sanitized name; checked anyway
            os.rmdir(path)
            raise ContractError(
                f"Refusing to write logs outside the log root: '{path}' resolves to "
                f"'{os.path.realpath(path)}', expected a directory inside '{os.path.realpath(root)}'."
            )
        return path
    raise ContractError(
        f"No free run directory name left for '{os.path.join(model_dir, base)}' after "
        f"{_MAX_SUFFIX - 1} attempts; expected a run directory that is not yet taken."
    )


__all__ = ["MAX_COMPONENT", "format_value", "hparams_slug", "run_dir", "sanitize_component"]
