"""Logs survive SIGTERM, Ctrl-C and SIGKILL of a training process (real subprocesses)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata as hp_metadata

from tests.summary.readback import read_run, run_dirs, steps
from tests.terminal import sigint_default
from tfguard.diagnose import diagnose_logdir
from tfguard.summary._lifecycle import SignalHook, _dispatch

CHILD = os.path.join(os.path.dirname(__file__), "child.py")
pytestmark = pytest.mark.slow


def _start(mode, logdir):
    return subprocess.Popen([sys.executable, CHILD, mode, str(logdir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


def _wait_ready(process, logdir, timeout=180.0) -> int:
    ready = os.path.join(logdir, "ready")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(ready):
            with open(ready) as handle:
                return int(handle.read())
        if process.poll() is not None:
            raise AssertionError(f"child exited early: {process.returncode}\n{process.stderr.read()[-3000:]}")
        time.sleep(0.1)
    process.kill()
    raise AssertionError("child never got ready")


def _run(logdir):
    (path,) = run_dirs(str(logdir))
    return read_run(path)


def test_sigterm_mid_epoch_flushes_and_dies_by_sigterm(tmp_path):
    process = _start("sigterm", tmp_path)
    try:
        step = _wait_ready(process, tmp_path)
        # nothing reached the disk yet: no epoch end, a huge queue and flush interval
        assert "batch/loss" not in _run(tmp_path)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGTERM
    run = _run(tmp_path)
    assert step == 7 and steps(run["batch/loss"]) == list(range(1, 8))
    assert steps(run["grad_norm/global"]) == list(range(1, 8))
    ends = [hp_metadata.parse_session_end_info_plugin_data(p.content).status
            for p in run[hp_metadata.SESSION_END_INFO_TAG]]
    assert ends == [api_pb2.STATUS_FAILURE]
    # issue 26, item 2: a terminated run is never "training completed ... healthy"
    (diagnosis,) = diagnose_logdir(str(tmp_path))
    assert diagnosis.status["state"] == "aborted" and not diagnosis.healthy
    assert diagnosis.status["text"] == ("training was interrupted at step 7 "
                                        "(the process received SIGTERM)")


def test_sigkill_loses_at_most_the_unflushed_tail(tmp_path):
    process = _start("sigkill", tmp_path)
    try:
        step = _wait_ready(process, tmp_path)
        before = _run(tmp_path)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL and step == 13
    after = _run(tmp_path)
    # the epoch end at step 10 flushed everything up to it; steps 11-13 were still queued
    assert steps(after["batch/loss"]) == steps(before["batch/loss"]) == list(range(1, 11))
    assert steps(after["train/loss"]) == [10]
    # issue 26, item 2: a killed run is "interrupted at step N", never healthy
    (diagnosis,) = diagnose_logdir(str(tmp_path))
    assert diagnosis.status["state"] == "aborted" and not diagnosis.healthy
    assert diagnosis.status["text"].startswith("training was interrupted at step 10: the log ends "
                                               "without the Logger's end-of-training record")


def test_ctrl_c_outside_the_step_is_flushed_before_the_interrupt(tmp_path):
    process = _start("sigint", tmp_path)
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0 and out.strip() == "interrupted", err[-3000:]
    assert steps(_run(tmp_path)["batch/loss"]) == list(range(1, 8))


def test_signal_hook_chains_to_a_python_handler():
    calls = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: calls.append(("previous", signum)))
    try:
        hook = SignalHook(lambda final: calls.append(("logs", final)), signal.SIGUSR1)
        assert hook.install()
        os.kill(os.getpid(), signal.SIGUSR1)
        hook.restore()
        assert calls == [("logs", False), ("previous", signal.SIGUSR1)]
        assert signal.getsignal(signal.SIGUSR1) is not _dispatch
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_signal_hook_under_sig_ign_only_flushes():
    calls = []
    previous = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        hook = SignalHook(lambda final: calls.append(final), signal.SIGUSR2)
        hook.install()
        os.kill(os.getpid(), signal.SIGUSR2)
        hook.restore()
        assert calls == [False] and signal.getsignal(signal.SIGUSR2) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_signal_hooks_restore_in_any_order():
    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        calls = []
        first = SignalHook(lambda final: calls.append("first"), signal.SIGUSR1)
        second = SignalHook(lambda final: calls.append("second"), signal.SIGUSR1)
        first.install()
        second.install()
        os.kill(os.getpid(), signal.SIGUSR1)
        assert calls == ["second", "first"]
        first.restore()
        os.kill(os.getpid(), signal.SIGUSR1)
        assert calls == ["second", "first", "second"]
        second.restore()
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR1, previous)
