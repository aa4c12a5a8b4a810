"""A real training job, watched by `tfguard watch` in another process: the fault is said while it runs.

`tests/watch/job.py` trains a tiny Keras model logged by tfguard's Logger
and by the stock Keras TensorBoard callback, with NaN data from an early
epoch on and a pause after every epoch. `python -m tfguard watch LOGDIR
--json` follows the logdir from before the job writes anything. The test
waits for the watch's `finding` line of each run and asserts, at the moment
the line arrives, that the job is still running.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.terminal import sigint_default
from tfguard.diagnose import diagnose_logdir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPOCHS = 60  # with a 0.5 s pause each: the job runs for more than 30 s after the fault


def _env() -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "src"), ROOT,
                                         env.get("PYTHONPATH", "")])
    return env


def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put((time.monotonic(), line))
    into.put((time.monotonic(), None))


def _rest(said: queue.Queue, timeout: float = 30.0) -> list[str]:
    """The lines the reader thread takes from a finished process, up to its end of stream."""
    lines = []
    while True:
        _when, line = said.get(timeout=timeout)
        if line is None:
            return lines
        lines.append(line)


@pytest.mark.slow
def test_an_injected_fault_is_reported_while_the_job_still_runs(tmp_path):
    logdir = tmp_path / "logs"
    watch = subprocess.Popen(
        [sys.executable, "-m", "tfguard", "watch", str(logdir), "--json", "--interval", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT,
        preexec_fn=sigint_default)
    job = subprocess.Popen([sys.executable, "-m", "tests.watch.job", str(logdir), str(EPOCHS)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           env=_env(), cwd=ROOT)
    said: queue.Queue = queue.Queue()
    epochs: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(watch.stdout, said), daemon=True).start()
    threading.Thread(target=_lines, args=(job.stdout, epochs), daemon=True).start()
    found = {}
    try:
        deadline = time.monotonic() + 240
        while len(found) < 2 and time.monotonic() < deadline:
            try:
                _when, line = said.get(timeout=1)
            except queue.Empty:
                assert watch.poll() is None, watch.stderr.read()
                continue
            assert line is not None, "the watch ended before reporting"
            event = json.loads(line)
            if event["event"] == "finding":
                alive = job.poll() is None
                found[event["run"]] = (event, alive)
        logged = []
        while not epochs.empty():
            logged.append(epochs.get()[1])
        job.terminate()
        job.wait(timeout=60)
        watch.send_signal(signal.SIGINT)
        watch.wait(timeout=60)
        err = watch.stderr.read()
        rest = _rest(said)  # the reader thread owns the watch's stdout: take its last lines
    finally:
        for process in (job, watch):
            if process.poll() is None:
                process.kill()
    assert sorted(found) == ["keras", "tfguard"], found
    for run, (event, alive) in found.items():
        assert alive, f"the job had ended when the {run} finding arrived"
        assert event["finding"]["id"] == "nonfinite" and event["severity"] == "error"
        assert event["finding"]["suggestion"]
    assert "done\n" not in logged  # the job had epochs left
    assert found["tfguard"][0]["step"] is not None and found["keras"][0]["epoch"] is not None
    summary = json.loads(rest[-1])
    assert summary["event"] == "summary" and summary["reason"] == "interrupted"
    assert watch.returncode == 0, err
    # the same finding, at the same onset, as tfguard diagnose gives on the files now
    final = {d.run: d.by_id("nonfinite")[0] for d in diagnose_logdir(logdir)}
    assert final["tfguard"].onset_step == found["tfguard"][0]["step"]
    assert final["keras"].onset_epoch == found["keras"][0]["epoch"]
