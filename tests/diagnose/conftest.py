"""Session fixtures of the diagnosis tests: the real training programs, trained once.

`trained` runs every program of `programs.py` (13 buggy, 4 healthy, 3 with
the stock Keras TensorBoard callback) into ONE log directory, mixing both
layouts, and keeps each program's `LiveDiagnosis`; `offline` diagnoses that
log directory once. Every end-to-end test reads these.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import time  # noqa: E402

import pytest  # noqa: E402

from . import programs  # noqa: E402


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """`(logdir, {program name: LiveDiagnosis}, {program name: seconds})`."""
    logdir = str(tmp_path_factory.mktemp("diagnose_runs"))
    lives, seconds = {}, {}
    for program in programs.PROGRAMS + programs.STOCK:
        start = time.perf_counter()
        lives[program.name] = programs.run_program(program, logdir)
        seconds[program.name] = time.perf_counter() - start
    return logdir, lives, seconds


@pytest.fixture(scope="session")
def offline(trained):
    """`{run name: Diagnosis}` of the shared log directory."""
    from tfguard.diagnose import diagnose_logdir

    logdir, _, _ = trained
    return {d.run: d for d in diagnose_logdir(logdir)}
