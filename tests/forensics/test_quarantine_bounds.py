"""Hostile and broken quarantine folders (issue 26, items 4 and 6).

Item 4: a deflate bomb, a header claiming 10^12 elements, a truncated
archive, an archive that disagrees with `meta.json`: each is one
`QuarantineError` (one `ERROR` line from `tfguard replay`), and nothing is
inflated beyond the file's size on disk. Item 6: with a disk that fills
(a file-size limit makes every large write fail with EFBIG, as a full disk
does with ENOSPC), failed saves count toward `max_quarantined` and leave no
partial folder; a partial folder left by a killed save replays as
"incomplete".
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import tracemalloc
import warnings
import zipfile

import keras
import numpy as np
import pytest

import tfguard
from tfguard._cli import main
from tfguard._errors import QuarantineError
from tfguard._forensics.quarantine import load_quarantine


def _quarantine(tmp_path) -> str:
    """A real quarantine folder: a guarded fit meets a NaN batch."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    tfguard.guard(model, policy="skip", quarantine_dir=str(tmp_path / "q"), localize=False)
    x = np.ones((8, 3), "float32")
    x[1, 1] = np.nan
    model.fit(x, np.ones((8, 1), "float32"), batch_size=4, shuffle=False, verbose=0)
    return tfguard.guard_events(model)[0].quarantine


def _npy_header(dtype: str, shape: tuple) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def _bomb(path: str, inflated: int) -> None:
    """An npz whose one float32 member inflates to `inflated` bytes of zeros (deflate)."""
    count = inflated // 4
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("x::.npy", "w", force_zip64=True) as member:
        member.write(_npy_header("<f4", (count,)))
        chunk = bytes(1 << 20)
        for _ in range(inflated // len(chunk)):
            member.write(chunk)


def _replay_error(path: str, capsys) -> str:
    assert main(["replay", path]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines[0].startswith("ERROR Received") and lines[1].startswith("hint: "), err
    assert len(lines) == 2 and "Traceback" not in err
    return lines[0]


def test_a_deflate_bomb_is_refused_before_it_inflates(tmp_path, capsys):
    folder = _quarantine(tmp_path)
    bomb = os.path.join(folder, "batch.npz")
    _bomb(bomb, 256 << 20)  # 256 MiB of zeros in about 250 KB
    assert os.path.getsize(bomb) < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(QuarantineError, match="would inflate to 268,435,"):
            load_quarantine(folder)
        _size, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak  # nothing near the 256 MiB was allocated
    assert "compression bomb" in _replay_error(folder, capsys)


def test_a_header_claiming_a_trillion_elements_is_one_error(tmp_path, capsys):
    folder = _quarantine(tmp_path)
    with zipfile.ZipFile(os.path.join(folder, "batch.npz"), "w") as archive:
        archive.writestr("x::.npy", _npy_header("<f8", (10**12,)) + bytes(64))
    line = _replay_error(folder, capsys)
    assert "declares <f8 (1000000000000,) (8,000,000,000,000 bytes) but holds" in line


def test_a_truncated_archive_with_meta_intact_is_one_error(tmp_path, capsys):
    folder = _quarantine(tmp_path)
    path = os.path.join(folder, "weights.npz")
    with open(path, "rb") as handle:
        blob = handle.read()
    with open(path, "wb") as handle:
        handle.write(blob[: len(blob) // 2])  # a save killed half way
    line = _replay_error(folder, capsys)
    assert "unreadable array file" in line and "weights.npz" in line and "cut short" in line


def test_arrays_that_disagree_with_meta_json_are_refused(tmp_path, capsys):
    folder = _quarantine(tmp_path)
    with open(os.path.join(folder, "meta.json")) as handle:
        meta = json.load(handle)
    assert meta["arrays"]["batch.npz"] == {"x::": {"dtype": "<f4", "shape": [4, 3]},
                                           "y::": {"dtype": "<f4", "shape": [4, 1]}}
    np.savez(os.path.join(folder, "batch.npz"), **{"x::": np.ones((40, 3), "float32"),
                                                    "y::": np.ones((4, 1), "float32")})
    line = _replay_error(folder, capsys)
    assert "'x::' is <f4 (40, 3) in the file, expected <f4 (4, 3) as meta.json declares" in line


def test_a_huge_meta_json_is_not_read_whole(tmp_path, capsys):
    folder = _quarantine(tmp_path)
    with open(os.path.join(folder, "meta.json"), "w") as handle:
        handle.write('{"pad": "' + "x" * (17 << 20) + '"}')
    assert "larger than 16,777,216 bytes" in _replay_error(folder, capsys)


@contextlib.contextmanager
def _disk_that_fills(limit: int):
    """Every write past `limit` bytes of one file fails with EFBIG, as on a full disk."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_on_a_full_disk_failed_saves_count_and_leave_no_partial_folder(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(64), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    root = tmp_path / "q"
    tfguard.guard(model, policy="warn", quarantine_dir=str(root), localize=False,
                  max_quarantined=5)
    x = np.full((40, 3), np.nan, "float32")  # 40 bad batches
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(x[:1], np.ones((1, 1), "float32"), verbose=0)  # traced before the disk fills
        with _disk_that_fills(2000):
            model.fit(x, np.ones((40, 1), "float32"), batch_size=1, shuffle=False, verbose=0)
    events = tfguard.guard_events(model)[1:]
    assert len(events) == 40
    failed = [e for e in events if e.quarantine_error]
    assert len(failed) == 4  # 5 attempts: the first fit's batch was saved, 4 more failed
    assert all("File too large" in e.quarantine_error for e in failed)
    assert not any(e.quarantine for e in events[4:])  # the cap holds: no 36 more attempts
    folders = sorted(os.listdir(root / model.name))
    assert folders == ["batch-00000000"]  # the one saved before; no partial folder


def test_a_partial_folder_replays_as_incomplete(tmp_path, capsys):
    folder = _quarantine(tmp_path)
    os.remove(os.path.join(folder, "meta.json"))  # a save killed before its last file
    line = _replay_error(folder, capsys)
    assert "incomplete quarantine folder" in line and "'meta.json' missing" in line
