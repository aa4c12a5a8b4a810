"""Run directories: layout, compact values, hostile names, uniqueness, never outside the root."""

from __future__ import annotations

import datetime
import os

import numpy as np
import pytest

from tfguard._errors import ContractError
from tfguard.summary._rundir import MAX_COMPONENT, format_value, run_dir, sanitize_component

AT = datetime.datetime(2025, 3, 4, 5, 6, 7)
HOSTILE = ["../", "/", "..", ".", "a\x00b", "line\nbreak\r", "x" * 10_000, "<script>alert(1)</script>",
           "..\\..\\windows", "\x1b[31mred", "CON", "", "   ", "~/.ssh", "a/../../b"]


def _inside(path, root):
    real_root = os.path.realpath(root)
    return os.path.realpath(path).startswith(real_root + os.sep)


@pytest.mark.parametrize(
    "value, expected",
    [(0.001, "1e-3"), (0.5, "0.5"), (3e-4, "3e-4"), (1e-5, "1e-5"), (100.0, "100"), (1e6, "1e6"),
     (0.25, "0.25"), (2.5e-7, "2.5e-7"), (-0.001, "-1e-3"), (0.0, "0"), (float("nan"), "nan"),
     (float("inf"), "inf"), (64, "64"), (True, "true"), (False, "false"), ("adam", "adam"),
     ((64, 32), "64-32"), (None, "none"), (np.float32(0.5), "0.5"), (np.int64(7), "7")],
)
def test_format_value_is_compact(value, expected):
    assert format_value(value) == expected


def test_layout_keys_sorted_and_timestamp(tmp_path):
    path = run_dir(tmp_path, "cnn", {"lr": 0.001, "batch": 64, "act": "relu", "bn": True}, now=AT)
    assert os.path.dirname(path) == os.path.join(tmp_path, "cnn")
    assert os.path.basename(path) == "act_relu_batch_64_bn_true_lr_1e-3_20250304-050607"
    assert os.path.isdir(path) and os.listdir(path) == []


def test_without_hparams_is_the_timestamp(tmp_path):
    assert os.path.basename(run_dir(tmp_path, "m", None, now=AT)) == "20250304-050607"


def test_same_second_gets_suffixes(tmp_path):
    paths = [run_dir(tmp_path, "m", {"lr": 0.1}, now=AT) for _ in range(4)]
    assert [os.path.basename(p) for p in paths] == [
        "lr_0.1_20250304-050607", "lr_0.1_20250304-050607-2",
        "lr_0.1_20250304-050607-3", "lr_0.1_20250304-050607-4",
    ]
    assert len(set(paths)) == 4


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_stay_inside_root(tmp_path, hostile):
    root = tmp_path / "root"
    path = run_dir(root, hostile, {hostile: hostile, "k": hostile}, now=AT)
    assert _inside(path, root)
    rel = os.path.relpath(path, root).split(os.sep)
    assert len(rel) == 2
    for component in rel:
        assert component not in ("", ".", "..") and ".." not in component
        assert not component.startswith(".")
        assert all(c.isprintable() and c not in "/\\\x00\n\r<>:\"|?*" for c in component)
        assert len(component) <= MAX_COMPONENT
    # nothing was created next to the root
    assert sorted(os.listdir(tmp_path)) == ["root"]


def test_long_names_are_cut_with_a_hash_and_stay_distinct():
    a = sanitize_component("x" * 10_000)
    b = sanitize_component("x" * 9_999 + "y")
    assert len(a) == len(b) == MAX_COMPONENT
    assert a != b and a[:100] == b[:100]
    wide = sanitize_component("模型" * 500)
    assert len(wide) <= MAX_COMPONENT and len(wide.encode("utf-8")) <= 240


def test_sanitize_examples():
    assert sanitize_component("../etc/passwd") == "___etc_passwd"
    assert sanitize_component("<script>") == "_script_"
    assert sanitize_component("a\x00b\nc") == "a_b_c"
    assert sanitize_component("CON") == "_CON"
    assert sanitize_component("mnist-cnn_v2.1") == "mnist-cnn_v2.1"


def test_symlink_out_of_root_is_refused(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "evil")
    with pytest.raises(ContractError, match="outside the log root"):
        run_dir(root, "evil", {"lr": 1})
    assert os.listdir(outside) == []


def test_empty_root_is_an_error():
    with pytest.raises(ContractError, match="root"):
        run_dir("", "m")
