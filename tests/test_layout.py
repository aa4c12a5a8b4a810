"""The house rule on module size: no module of tfguard over 450 lines without a reason.

A module that long usually holds more than one job. When it does not (one
table, one state machine), its docstring says why in one line starting
with `Long because:`; this test walks `src/tfguard` and names every module
over the limit that lacks that line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tfguard

LIMIT = 450
REASON = "Long because:"
ROOT = Path(tfguard.__file__).parent


def long_modules_without_reason(root: Path = ROOT, limit: int = LIMIT) -> list[str]:
    """`"path (N lines)"` for each module of `root` over `limit` lines whose docstring gives no reason."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines <= limit:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if not any(line.strip().startswith(REASON) for line in doc.splitlines()):
            found.append(f"{path.relative_to(root.parent)} ({lines} lines)")
    return found


def test_no_module_is_long_without_a_reason():
    missing = long_modules_without_reason()
    assert not missing, (
        f"{len(missing)} module(s) over {LIMIT} lines without a reason: " + ", ".join(missing)
        + f". Expected each to be split into modules of one job, or its docstring to hold one "
        f"line starting with {REASON!r} that says why it is one piece.")


def test_the_check_names_a_long_module_without_a_reason(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "x = 1\n" * 5
    (package / "short.py").write_text('"""Short."""\n' + "x = 1\n" * 4)
    (package / "long.py").write_text('"""Long."""\n' + body)
    (package / "reasoned.py").write_text(f'"""Long.\n\n{REASON} one table.\n"""\n' + body)
    assert long_modules_without_reason(package, limit=5) == ["pkg/long.py (6 lines)"]
