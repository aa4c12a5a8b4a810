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
"""

from __future__ import annotations

import re

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


__all__ = ["printable"]
