"""The public API is listed once, in `tfguard/__init__.py`, and everything else is marked private.

`tfguard.__all__` names the public API: functions and classes, and the
public modules (`tfguard.summary`, `tfguard.diagnose`, ...), each with its
own `__all__`. Every other module of the package is internal: its name, or
the name of a package above it, starts with `_` (`tfguard._firewall.stages`,
`tfguard.summary._logger`), so a reader of an import knows whether it may
change without notice. docs/reference.md documents `tfguard.__all__`
(`tests/test_docs.py`).
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import tfguard

SRC = Path(tfguard.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _public_modules() -> set[str]:
    """`tfguard`, `tfguard.__main__` and the modules `tfguard.__all__` lists."""
    listed = {name for name in tfguard.__all__ if importlib.util.find_spec(f"tfguard.{name}") is not None}
    return {"tfguard", "tfguard.__main__"} | {f"tfguard.{name}" for name in listed}


def test_every_module_not_listed_public_is_marked_private():
    unmarked = sorted(name for name in map(_module_name, SRC.rglob("*.py"))
                      if name not in _public_modules()
                      and not any(part.startswith("_") for part in name.split(".")[1:]))
    assert not unmarked, (f"modules neither listed in tfguard.__all__ nor marked private: {unmarked}; "
                          "prefix the module (or its package) with `_`, or list it in tfguard/__init__.py")


def test_every_module_listed_public_exists_and_is_not_marked_private():
    files = set(map(_module_name, SRC.rglob("*.py")))
    for name in _public_modules():
        assert name in files, f"{name} is listed public but no such module exists"
        assert not any(part.startswith("_") for part in name.split(".")[1:] if part != "__main__"), name


def test_every_public_name_resolves_and_is_defined_once():
    for name in set(tfguard.__all__) - {"__version__"}:
        value = getattr(tfguard, name)
        module = getattr(value, "__module__", None) or getattr(value, "__name__", "")
        assert module.startswith("tfguard"), f"tfguard.{name} comes from {module}, not from tfguard"
    aliases = {}
    for name in tfguard.__all__:
        value = getattr(tfguard, name)
        if callable(value) or isinstance(value, type):
            aliases.setdefault(id(value), []).append(name)
    doubled = [names for names in aliases.values() if len(names) > 1]
    assert not doubled, f"one object under two public names: {doubled}; keep one"


def test_the_check_finds_an_unmarked_module(tmp_path, monkeypatch):
    package = tmp_path / "tfguard"
    (package / "summary").mkdir(parents=True)
    for path in ("__init__.py", "summary/__init__.py", "summary/_logger.py", "summary/writer.py"):
        (package / path).write_text("")
    monkeypatch.setattr(tfguard, "__file__", str(package / "__init__.py"))
    monkeypatch.setitem(globals(), "SRC", package)
    unmarked = sorted(name for name in map(_module_name, SRC.rglob("*.py"))
                      if name not in {"tfguard", "tfguard.summary"}
                      and not any(part.startswith("_") for part in name.split(".")[1:]))
    assert unmarked == ["tfguard.summary.writer"]
