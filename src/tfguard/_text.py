"""Text from files, logs and users, made safe to show: no terminal control, no markup.

Every string tfguard prints that it did not write itself (a path, a run
name, a layer name, a field of a quarantine's `meta.json`, an exception
message) goes through `printable`: control characters (ESC, BEL, the rest of
C0 and C1, DEL) are shown escaped, so a crafted file cannot retitle or clear
the terminal. Rendering with rich goes through `rich.text.Text` objects,
never markup, so `[bold]` or `[/]` in a name is shown as written.

Example:

>>> printable("run\\x1b]0;TITLE\\x07 ok")
'run\\\\x1b]0;TITLE\\\\x07 ok'
>>> printable("two\\nlines", newlines=False)
'two\\\\nlines'

A terminal that cannot show Unicode (`PYTHONIOENCODING=ascii`, `LC_ALL=C`
with an old Python) gets tfguard's own arrows, ellipses and box lines in
ASCII (`degrade`, and `SafeStream` around a console's file) instead of a
`UnicodeEncodeError`:

>>> degrade("loss 2.3 → 0.1 … ×3", "ascii")
'loss 2.3 -> 0.1 ... x3'
"""

from __future__ import annotations

import re
import unicodedata

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_NO_NEWLINES = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: object, *, newlines: bool = True) -> str:
    """`text` with every terminal control character shown as `\\xNN` (or `\\n` for a newline).

    Args:
        text: anything; `str(text)` is used.
        newlines: keep newlines and tabs as they are (a message); `False`
            escapes them too (a cell of a table, a name). Defaults to `True`.
    """
    pattern = _CONTROL if newlines else _CONTROL_NO_NEWLINES

    def escape(match: re.Match) -> str:
        char = match.group(0)
        if char == "\n":
            return "\\n"
        if char == "\t":
            return "\\t"
        return f"\\x{ord(char):02x}"

    return pattern.sub(escape, str(text))


ASCII_FORMS = {
    "→": "->", "←": "<-", "↔": "<->", "⇒": "=>", "…": "...", "×": "x", "−": "-", "—": "--",
    "–": "-", "·": "-", "•": "*", "±": "+/-", "µ": "u", "≤": "<=", "≥": ">=", "≈": "~",
    "✓": "ok", "✔": "ok", "✗": "x", "✘": "x", "▲": "^", "▼": "v", "█": "#", "░": ".",
    "“": '"', "”": '"', "‘": "'", "’": "'",
}
"""The ASCII spelling of the non-ASCII characters tfguard prints itself."""


def _ascii_form(char: str) -> str:
    if char in ASCII_FORMS:
        return ASCII_FORMS[char]
    if "\u2500" <= char <= "\u257f":  # box drawing (rich's rules and panels)
        name = unicodedata.name(char, "")
        return "-" if "HORIZONTAL" in name else "|" if "VERTICAL" in name else "+"
    return char.encode("ascii", "backslashreplace").decode("ascii")


def degrade(text: str, encoding: str | None) -> str:
    """`text` as it can be written in `encoding`: unchanged if it fits, else with ASCII forms.

    Args:
        text: the text to write.
        encoding: the stream's encoding; `None` means UTF-8.

    Returns:
        `text`, or, when `encoding` cannot hold a character, the text with
        each such character replaced by its ASCII form (`ASCII_FORMS`, box
        lines as `-`, `|`, `+`, anything else as a `\\uXXXX` escape).
    """
    encoding = encoding or "utf-8"
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError):
        pass
    out = []
    for char in text:
        try:
            char.encode(encoding)
            out.append(char)
        except (UnicodeEncodeError, LookupError):
            out.append(_ascii_form(char))
    return "".join(out)


def clean(value, limit: int = 300, *, newlines: bool = False) -> str:
    """A log-supplied value as safe, bounded, one-line terminal text.

    Example:

    >>> print(clean("run\\nname\\x1b[2J [bold]"))
    run\\nname\\x1b[2J [bold]

    Args:
        value: anything; it is converted with `str`.
        limit: the most characters kept. Defaults to `300`.
        newlines: keep newlines (a message); `False` shows them as `\\n`
            (a name, a table cell). Defaults to `False`.

    Returns:
        The text with control characters shown escaped, cut with `...` past
        `limit`. Put it in a `rich.text.Text`, never in a markup string.
    """
    text = printable(value, newlines=newlines)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class SafeStream:
    """A text stream that writes what its encoding cannot hold in ASCII forms (`degrade`).

    Everything else (`flush`, `isatty`, `fileno`, `encoding`) is the wrapped stream's.

    Args:
        stream: a text stream such as `sys.stdout`.
    """

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(degrade(text, getattr(self._stream, "encoding", None)))

    def __getattr__(self, name):
        return getattr(self._stream, name)


__all__ = ["ASCII_FORMS", "SafeStream", "clean", "degrade", "printable"]
