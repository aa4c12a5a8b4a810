"""No private Keras or TensorFlow name in `src/` outside the adapters; each failure names file:line.

The adapters are `_hooks/keras_compat.py` (Keras), `_hooks/tf_compat.py`
(TensorFlow) and `_distribute/keras_20585.py` (a workaround kept apart so it
can be deleted whole); `seam.py` spells the private attributes those
adapters replace, in its list of patch sites, and reads none. Every other module of `src/tfguard` is read (with
`ast`, so comments and docstrings do not count) and must keep three rules:

1. No private framework module: no import of `tensorflow.python`,
   `tensorflow.core`, `keras.src` (or any `_`-prefixed module of
   TensorFlow or Keras), no `tf.__internal__`, no `keras.src.` attribute.
2. No known framework private name (`FRAMEWORK_PRIVATE`: every private
   name the adapters wrap), whether read as an attribute of anything but
   `self` / `cls`, through `getattr` / `hasattr` / `setattr`, or spelled
   as a string (`op._set_attr("_lower_using_switch_merge")`).
3. No private attribute that tfguard does not define itself. A name
   like `found._step` is fine when some module of tfguard assigns
   `x._step = ...`, defines `def _step` or a class attribute `_step`; a
   private name nobody in tfguard defines (`optimizer._iterations`,
   `self._flatten_layers()` in a subclass of a Keras class) belongs to
   a framework object and must go through an adapter. This is what
   catches a private name not yet in `FRAMEWORK_PRIVATE`.

tfguard's own `_x` attributes on its own objects pass all three; the
canaries of the adapters are `tests/hooks/test_keras_surface.py`,
`test_tf_surface.py` and `tests/distribute/test_keras_20585_surface.py`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tfguard"
ADAPTERS = frozenset({"_hooks/keras_compat.py", "_hooks/tf_compat.py", "_distribute/keras_20585.py", "_seam.py"})
INTERNALS = Path(__file__).resolve().parents[1] / "docs" / "internals.md"

FRAMEWORK_PRIVATE = frozenset({
    # Keras (_hooks/keras_compat.py)
    "_call_has_training_arg", "_flatten_layers", "_loss_tracker", "_symbolic_build", "_compute_loss",
    "_trainable_variables", "_learning_rate", "_fn_kwargs", "_keras_history", "_inbound_nodes",
    "_outbound_nodes", "_build_shapes_dict", "_backend_update_step", "_apply_weight_decay", "_var_key",
    "_clip_gradients",
    # Keras (_distribute/keras_20585.py)
    "_maybe_symbolic_build", "_make_function", "_autoconvert_optionals", "_in_multi_worker_mode",
    # TensorFlow (_hooks/tf_compat.py)
    "_resource", "_py_funcs", "_func", "_variant_tensor", "_set_attr", "_lower_using_switch_merge",
})
"""Private Keras / TensorFlow names tfguard knows: flagged anywhere outside the adapters.

The ones an adapter uses today must each have a row in the table of docs/internals.md.
"""

PRIVATE_MODULES = ("tensorflow.python", "tensorflow.core", "keras.src", "tensorflow._api", "keras._tf_keras")
_ATTRIBUTE_CALLS = {"getattr", "hasattr", "setattr", "delattr"}
_DUNDER_CALLS = {"__setattr__", "__getattribute__", "__delattr__"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _modules(adapters: bool) -> list[tuple[str, ast.Module]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if (relative in ADAPTERS) == adapters:
            found.append((relative, ast.parse(path.read_text(), filename=str(path))))
    return found


def _prose(tree: ast.Module) -> set[int]:
    """`id`s of the string constants that name nothing: docstrings, bare strings, the parts of f-strings."""
    found = {id(node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    found.update(id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values)
    return found


def _named_attribute(call: ast.Call) -> str | None:
    """The constant attribute name of `getattr(x, "_n")`, `setattr(...)`, `object.__setattr__(x, "_n", v)`."""
    func = call.func
    named = (isinstance(func, ast.Name) and func.id in _ATTRIBUTE_CALLS) or (
        isinstance(func, ast.Attribute) and func.attr in _DUNDER_CALLS)
    if named and len(call.args) >= 2 and isinstance(call.args[1], ast.Constant) \
            and isinstance(call.args[1].value, str):
        return call.args[1].value
    return None


def own_private_names() -> set[str]:
    """Every private name tfguard defines outside the adapters: functions, classes, attributes it assigns."""
    names: set[str] = set()
    for _, tree in _modules(adapters=False):
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for part in ast.walk(target):
                        if isinstance(part, ast.Attribute):
                            names.add(part.attr)
                        elif isinstance(part, ast.Name):
                            names.add(part.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                    or isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "__setattr__":
                name = _named_attribute(node)
                if name:
                    names.add(name)
    return {name for name in names if _private(name)}


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def violations(relative: str, tree: ast.Module, own: set[str]) -> list[str]:
    """`file:line: what` for each use of a private framework name or module in one module."""
    found = []
    prose = _prose(tree)

    def report(node, what):
        found.append(f"src/tfguard/{relative}:{node.lineno}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PRIVATE_MODULES):
                    report(node, f"imports the private module `{alias.name}` (rule 1)")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PRIVATE_MODULES):
            report(node, f"imports from the private module `{node.module}` (rule 1)")
        elif isinstance(node, ast.Attribute):
            if node.attr == "__internal__":
                report(node, "uses `tf.__internal__` (rule 1)")
            elif node.attr == "src" and isinstance(node.value, ast.Name) and node.value.id == "keras":
                report(node, "uses `keras.src` (rule 1)")
            elif _private(node.attr):
                if node.attr in FRAMEWORK_PRIVATE and not _is_self(node.value):
                    report(node, f"reads the framework's private `{node.attr}` (rule 2)")
                elif node.attr not in own:
                    report(node, f"reads `{node.attr}`, a private name tfguard never defines (rule 3)")
        elif isinstance(node, ast.Call):
            name = _named_attribute(node)
            if name and _private(name):
                prose.add(id(node.args[1]))  # reported here, once (ast.walk visits the call before its arguments)
                if name in FRAMEWORK_PRIVATE:
                    report(node, f"reaches the framework's private `{name}` by name (rule 2)")
                elif name not in own:
                    report(node, f"reaches `{name}`, a private name tfguard never defines, by name (rule 3)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose \
                and node.value in FRAMEWORK_PRIVATE:
            report(node, f"spells the framework's private `{node.value}` (rule 2)")
    return found


def test_the_rule_sees_what_it_forbids():
    source = '''
from tensorflow.python.ops import gen_summary_ops
import keras.src.backend
def f(optimizer, writer, model, mine):
    mine._step = 1
    tf.__internal__.distribute
    getattr(writer, "_resource", None)
    optimizer._trainable_variables
    model._some_new_private_thing
    mine._step
    self._learning_rate
'''
    lines = sorted(violations("example.py", ast.parse(source), {"_step"}), key=lambda line: int(line.split(":")[1]))
    assert [int(line.split(":")[1]) for line in lines] == [2, 3, 6, 7, 8, 9, 11], lines
    assert "src/tfguard/example.py:9: reads `_some_new_private_thing`, a private name tfguard never defines" in lines[5]
    assert "rule 3" in lines[6]  # self._learning_rate: no class of tfguard defines it, so a framework base does


def test_no_private_framework_name_outside_the_adapters():
    own = own_private_names()
    found = [line for relative, tree in _modules(adapters=False) for line in violations(relative, tree, own)]
    assert not found, ("private Keras / TensorFlow names outside _hooks/keras_compat.py, _hooks/tf_compat.py and "
                       "_distribute/keras_20585.py; route each through an adapter, with a canary and a row in docs/internals.md:\n"
                       + "\n".join(found))


def test_every_known_private_name_is_in_the_internals_table():
    section = INTERNALS.read_text(encoding="utf-8")
    adapters = "\n".join((SRC / adapter).read_text() for adapter in sorted(ADAPTERS))
    used = {name for name in FRAMEWORK_PRIVATE if name in adapters}
    assert "_trainable_variables" in used and "_resource" in used  # the adapters are read
    missing = sorted(name for name in used if name not in section)
    assert not missing, f"private names the adapters use but docs/internals.md does not list: {missing}"


def _internals_rows() -> list[list[str]]:
    section = INTERNALS.read_text(encoding="utf-8")
    rows = [line.strip().strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return [row for row in rows[1:] if not set(row[0]) <= set("-| ")]  # past the header and its rule


def test_every_row_of_the_internals_table_names_a_canary_test_that_exists():
    rows = _internals_rows()
    assert len(rows) >= 20, "the private-surface table of docs/internals.md was not found"
    root = INTERNALS.parents[1]
    missing = []
    for row in rows:
        canaries = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", row[-1])
        if not canaries:
            missing.append(f"{row[0]}: no `tests/...py::test_name` in its canary column")
        for path, name in canaries:
            file = root / path
            defined = file.is_file() and re.search(rf"^def {name}\(", file.read_text(), re.M)
            if not defined:
                missing.append(f"{row[0]}: {path}::{name} does not exist")
    assert not missing, "rows of docs/internals.md without a canary:\n" + "\n".join(missing)


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_the_adapters_exist(adapter):
    assert (SRC / adapter).is_file(), f"{adapter} moved: update ADAPTERS in {Path(__file__).name}"
