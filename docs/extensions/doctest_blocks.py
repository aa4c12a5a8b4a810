"""A griffe extension for the docs: doctest lines in a docstring become a `pycon` code block.

tfguard's docstrings put their examples after an `Example:` line, unindented,
as doctest lines (`>>>`, `...`, then the expected output up to a blank line).
Markdown would read them as text: `>>>` as nested quotes, `[a][b]` in an
output as a link. This turns each such run of lines into a fenced block
before mkdocstrings renders the docstring; the docstrings stay as doctest
runs them.
"""

from __future__ import annotations

import griffe


def fence_doctests(text: str) -> str:
    """`text` with each run of doctest lines (from a `>>>` line to the next blank line) fenced.

    Lines already inside a fenced block are left as they are.
    """
    out: list[str] = []
    in_fence = in_doctest = False
    fence_end = "```"
    for line in text.splitlines():
        stripped = line.strip()
        if in_doctest and not stripped:
            out.append(fence_end)
            in_doctest = False
        elif not in_doctest and stripped.startswith("```"):
            in_fence = not in_fence
        elif not in_doctest and not in_fence and stripped.startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            fence_end = f"{indent}```"
            out.append(f"{indent}```pycon")
            in_doctest = True
        out.append(line)
    if in_doctest:
        out.append(fence_end)
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fences the doctest lines of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
