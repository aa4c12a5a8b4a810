"""tfguard's commands as a user runs them on this pair: `tfguard run` on an unmodified script, the offline
commands on the logs it wrote, `tensorboard --logdir` with the tfguard tab, `tfguard doctor`, and a road
command where the road extra is not installed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "COLUMNS": "200"}

SCRIPT = """
import keras
import numpy as np

rng = np.random.default_rng(0)
x = rng.normal(size=(256, 8)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("int64")
x[40] = np.nan  # batch 1 of each epoch
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(2, activation="softmax")], name="user_script")
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
history = model.fit(x, y, epochs=3, batch_size=32, validation_split=0.25, shuffle=False, verbose=0)
print("SCRIPT-SAYS finite weights", all(np.isfinite(w).all() for w in model.get_weights()))
"""


def _command(name: str, *args: str, cwd=None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *args], capture_output=True, text=True, env=ENV, cwd=cwd,
                          timeout=timeout, check=False)


@pytest.fixture(scope="module")
def attached(tmp_path_factory):
    """`tfguard run --policy skip script.py` on a script with a NaN row: `(result, logdir)`."""
    root = tmp_path_factory.mktemp("attached")
    script = root / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    logdir = root / "runs"
    result = _command("tfguard", "run", "--logdir", str(logdir), "--policy", "skip", str(script), cwd=root)
    return result, logdir


def test_run_attaches_to_an_unmodified_script_and_skips_the_nan_batch(attached):
    result, logdir = attached
    assert result.returncode == 0, result.stderr[-3000:]
    assert "SCRIPT-SAYS finite weights True" in result.stdout
    report = json.loads((logdir / "report.json").read_text())
    assert report["exit_code"] == 0 and report["runs"][0]["run"] == "user_script-fit1"
    assert "user_script-fit1" in result.stderr


def test_the_offline_commands_read_the_logs_it_wrote(attached, tmp_path):
    _, logdir = attached
    diagnosed = _command("tfguard", "diagnose", str(logdir), "--json")
    assert diagnosed.returncode in (0, 1), diagnosed.stderr[-3000:]  # 1: a finding of severity error
    doc = json.loads(diagnosed.stdout)
    assert doc["schema"] == "tfguard.report/1" and [r["run"] for r in doc["runs"]] == ["user_script-fit1"]
    compared = _command("tfguard", "compare", str(logdir))
    assert compared.returncode == 0 and "user_script-fit1" in compared.stdout, compared.stderr[-3000:]
    html = tmp_path / "report.html"
    reported = _command("tfguard", "report", str(logdir), "-o", str(html))
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert html.read_text().startswith("<!DOCTYPE html>")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _poll(url: str, ready, timeout: float = 90.0):
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                last = json.loads(response.read().decode())
            if ready(last):
                return last
        except OSError as error:  # not listening yet
            last = error
        time.sleep(0.5)
    raise AssertionError(f"{url} never answered as expected; last answer: {last!r}")


def test_tensorboard_serves_the_tfguard_tab_for_the_run(attached):
    _, logdir = attached
    port = _free_port()
    server = subprocess.Popen([str(BIN / "tensorboard"), "--logdir", str(logdir), "--host", "127.0.0.1",
                               "--port", str(port), "--reload_interval", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    base = f"http://127.0.0.1:{port}"
    try:
        listing = _poll(base + "/data/plugins_listing", lambda doc: "tfguard" in doc)
        assert listing["tfguard"]["enabled"] is True and listing["tfguard"]["tab_name"] == "tfguard"
        runs = _poll(base + "/data/plugin/tfguard/runs", lambda doc: doc.get("runs"))
        assert [run["run"] for run in runs["runs"]] == ["user_script-fit1"]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_doctor_says_the_pair_is_supported(expected_pair):
    result = _command("tfguard", "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    tensorflow, keras = expected_pair
    assert checks["versions"]["status"] == "ok", checks["versions"]
    assert checks["versions"]["detail"].startswith(f"TensorFlow {tensorflow} with Keras {keras}: supported")


def test_importing_tfguard_says_nothing_about_versions():
    result = subprocess.run([sys.executable, "-W", "default", "-c", "import tfguard"], capture_output=True,
                            text=True, env=ENV, timeout=60, check=False)
    assert result.returncode == 0 and "UnsupportedVersionsWarning" not in result.stderr, result.stderr


def test_a_road_command_without_the_road_extra_says_how_to_get_it(tmp_path, freeze_dir):
    """The wheel was installed without `[road]`: scikit-learn is not there, and the demo says so."""
    installed = (freeze_dir / "after.txt").read_text().lower()
    assert "scikit-learn==" not in installed and "ai-edge-litert==" not in installed
    result = _command("tfguard", "demo", "--root", str(tmp_path / "demo"), "--epochs", "1")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "needs scikit-learn (module `sklearn`), which is not installed" in result.stderr
    assert "pip install 'tfguard[road]'" in result.stderr and "Traceback" not in result.stderr
