"""The one seam (issue 43, item 1): every attribute tfguard replaces in Keras goes through `tfguard._seam`.

A fit with the guard and a Logger installs its patches in the order of
`_seam.SITES` and leaves none behind once released; no module but
`tfguard/_seam.py` assigns an attribute of a patch site (read from the
source); and `replace`/`restore` give back exactly what was there, in any
order of removal.
"""

from __future__ import annotations

import ast
from pathlib import Path

import keras
import numpy as np
import pytest

import tfguard
from tfguard import _seam
from tfguard._firewall.instrument import release

SRC = Path(tfguard.__file__).parent
KERAS_RESETS = {"train_function", "test_function", "predict_function"}
"""Keras's cached functions, which tfguard may set to `None` so that Keras builds them again."""


def _site_index(patch) -> int:
    return _seam.SITES.index(patch.site)


def test_a_guarded_logged_fit_patches_in_the_order_of_the_sites_and_leaves_nothing(tmp_path):
    x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(2, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy")
    tfguard.guard(model)
    seen = []
    record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: seen.append(
        [(p.name, p.owner) for p in _seam.patches()]))
    model.fit(x, y, batch_size=16, epochs=1, verbose=0,
              callbacks=[tfguard.Logger(str(tmp_path)), record])
    in_fit = seen[-1]
    mine = [name for name, owner in in_fit if owner is model]
    assert mine[:5] == ["train_step", "make_train_function", "reset_metrics", "fit", "_tfguard_completed_step"]
    assert "compute_loss" in mine and mine.count("train_function") == 2  # the host loop, the Logger's wrapper
    assert [name for name, owner in in_fit if owner is model.layers[0]] == ["call"]
    assert any(name == "apply" and isinstance(owner, type) for name, owner in in_fit)
    ours = [p for p in _seam.patches() if p.owner is model or any(p.owner is layer for layer in model.layers)]
    indices = [_site_index(p) for p in ours]
    assert indices == sorted(indices), [(p.name, type(p.owner).__name__, _site_index(p)) for p in ours]
    release(model)  # what tfguard run does with each model it attached to
    assert [p for p in _seam.patches() if p.owner is model or any(p.owner is layer for layer in model.layers)] == []
    assert not {"train_step", "fit", "compute_loss", "make_train_function"} & set(vars(model))
    assert "call" not in vars(model.layers[0])


def _assignments(tree: ast.AST):
    """`(line, attribute)` of each assignment, deletion, or setattr/delattr call on an attribute."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and not (
                        isinstance(target.value, ast.Name) and target.value.id == "self"):
                    value = getattr(node, "value", None)
                    none = isinstance(value, ast.Constant) and value.value is None
                    yield node.lineno, target.attr, none
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in ("setattr", "delattr", "__setattr__", "__delattr__") and len(node.args) >= 2:
                owner, attribute = node.args[:2]
                if isinstance(owner, ast.Name) and owner.id == "self":
                    continue  # an object setting its own (a frozen dataclass's __post_init__)
                if isinstance(attribute, ast.Name) and attribute.id.lstrip("_").isupper():
                    continue  # a module's constant: one of tfguard's own markers (INSTALLED_ATTRIBUTE, INNER, ...)
                yield node.lineno, attribute.value if isinstance(attribute, ast.Constant) else "<computed>", False


def test_no_module_but_the_seam_assigns_an_attribute_of_a_patch_site():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "_seam.py":
            continue
        for line, attribute, none in _assignments(ast.parse(path.read_text(encoding="utf-8"))):
            if attribute in KERAS_RESETS and none:
                continue
            if attribute in _seam.SITE_NAMES or attribute == "<computed>":
                found.append(f"{path.relative_to(SRC)}:{line}: {attribute}")
    assert found == [], "patch Keras through tfguard._seam.replace/restore:\n" + "\n".join(found)


class _Owner:
    def fit(self):
        return "own"


def test_replace_and_restore_give_back_exactly_what_was_there_in_any_order():
    owner = _Owner()
    _seam.replace(owner, "fit", lambda: "first")
    _seam.replace(owner, "fit", lambda: "second")
    assert owner.fit() == "second"
    first = _seam.patches(owner)[0].value
    assert _seam.restore(owner, "fit", first)  # from under the later one: spliced out
    assert owner.fit() == "second"
    assert _seam.restore(owner, "fit")
    assert owner.fit() == "own" and "fit" not in vars(owner) and _seam.patches(owner) == []
    assert not _seam.restore(owner, "fit")


def test_a_class_attribute_comes_back_and_one_replaced_since_is_left_alone():
    class Model:
        def fit(self):
            return "class"

    held = Model.__dict__["fit"]
    _seam.replace(Model, "fit", lambda self: "patched")
    assert Model().fit() == "patched"
    _seam.restore(Model, "fit")
    assert Model.__dict__["fit"] is held

    model = Model()
    _seam.replace(model, "train_function", "host loop")
    object.__setattr__(model, "train_function", "built by Keras since")
    assert _seam.restore(model, "train_function")
    assert model.train_function == "built by Keras since"


def test_an_attribute_that_is_not_a_site_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"'predict' is not a patch site of an? object.*add a Site to tfguard._seam.SITES"):
        _seam.replace(_Owner(), "predict", lambda: None)


def test_a_patched_object_that_is_gone_leaves_no_patch():
    owner = _Owner()
    _seam.replace(owner, "fit", lambda: "x")
    del owner
    assert not [p for p in _seam.patches() if isinstance(p.owner, _Owner)]
