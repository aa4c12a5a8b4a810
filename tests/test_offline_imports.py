"""The offline half never imports TensorFlow or Keras.

`import tfguard.events` / `tfguard.diagnose` and the commands `tfguard
diagnose`, `compare` and `report` read event files with the TFRecord
framing and TensorBoard's protos only, so they start in a fraction of a
second and print no TensorFlow banner. Each check runs in a fresh Python
process (this test process has imported TensorFlow already), with
TensorFlow's logging left at its default so a banner would show on stderr.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests.events.eventdata import scalar_event, write_framed

HEAVY = ("tensorflow", "keras", "matplotlib", "pandas")
# absl's C++ log prefix ("I0000 00:00:1796394681.387065   15435 port.cc:153] ..."), and what
# TensorFlow's import prints in Python (oneDNN, CUDA, the legacy-Keras notice).
TF_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d")
TF_SIGNS = ("tensorflow", "TensorFlow", "oneDNN", "TF_ENABLE_ONEDNN_OPTS", "cuda", "CUDA", "absl::")


def _tensorflow_lines(stderr: str) -> list[str]:
    """The lines of stderr that TensorFlow or its C++ logging would print (its start-up banner).

    Only TensorFlow's lines: a warning this machine prints for its own reasons
    (a package's deprecation, a locale) says nothing about tfguard.
    """
    return [line for line in stderr.splitlines()
            if TF_LOG_LINE.match(line) or any(sign in line for sign in TF_SIGNS)]


def _python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, check=False)


@pytest.fixture
def logdir(tmp_path):
    """Two runs in tfguard's layout, written byte by byte (no TensorFlow)."""
    for run, final in (("lr_0.1", 0.2), ("lr_1.0", 2.3)):
        (tmp_path / run).mkdir()
        events = []
        for epoch in range(6):
            step = 10 * (epoch + 1)
            loss = 2.3 - (2.3 - final) * epoch / 5
            events += [scalar_event("train/loss", step, loss), scalar_event("val/loss", step, loss),
                       scalar_event("val/accuracy", step, 1 - loss / 2.3),
                       scalar_event("grad_norm/dense", step, 0.5)]
        write_framed(str(tmp_path / run / "events.out.tfevents.1.host"), events)
    return tmp_path


def test_importing_the_offline_packages_loads_no_tensorflow():
    done = _python("""
        import sys
        import tfguard.diagnose, tfguard.events
        from tfguard.diagnose import diagnose_logdir, render_terminal, to_json, write_html
        from tfguard import _cli, _tags, _text, _errors
        print(sorted(m for m in HEAVY if m in sys.modules))
        print("LiveDiagnosis" in dir(tfguard.diagnose))
    """.replace("HEAVY", repr(HEAVY)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "True"]
    assert _tensorflow_lines(done.stderr) == [], done.stderr


@pytest.mark.parametrize("command", [
    ["diagnose", "{logdir}", "--json"],
    ["diagnose", "{logdir}"],
    ["compare", "{logdir}", "--sort-by", "val/loss"],
    ["report", "{logdir}", "-o", "{logdir}/report.html"],
])
def test_offline_commands_load_no_tensorflow_and_print_no_banner(logdir, command):
    argv = [part.format(logdir=logdir) for part in command]
    done = _python("""
        import sys
        from tfguard._cli import main
        status = main(sys.argv[1:])
        print("LOADED", sorted(m for m in ("tensorflow", "keras") if m in sys.modules))
        sys.exit(status)
    """, *argv)
    assert done.returncode == (1 if command[0] == "diagnose" else 0), done.stderr  # 1: no_learning
    assert done.stdout.rstrip().endswith("LOADED []"), done.stdout[-500:]
    assert _tensorflow_lines(done.stderr) == [], done.stderr  # no TensorFlow banner
    if "--json" in argv:
        report = json.loads(done.stdout.rsplit("LOADED", 1)[0])
        assert [r["run"] for r in report["runs"]] == ["lr_0.1", "lr_1.0"]
    if command[0] == "report":
        assert (logdir / "report.html").stat().st_size > 10_000  # with its plots


def test_live_diagnosis_is_still_importable_from_the_package():
    from tfguard.diagnose import LiveDiagnosis
    from tfguard.diagnose._live import LiveDiagnosis as defined

    assert LiveDiagnosis is defined
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        import tfguard.diagnose

        _ = tfguard.diagnose.Nope


def test_the_banner_check_recognizes_tensorflow_lines():
    banner = (  # what `import tensorflow` printed on this project's machine
        "I0000 00:00:1796394681.387065   15435 port.cc:153] oneDNN custom operations are on. "
        "You may see slightly different numerical results due to floating-point round-off errors "
        "from different computation orders. To turn them off, set the environment variable "
        "`TF_ENABLE_ONEDNN_OPTS=0`.\n"
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    )
    other = "/usr/lib/python3/dist-packages/foo.py:3: UserWarning: a machine's own warning\n"
    assert _tensorflow_lines(banner + other) == banner.splitlines()
    assert _tensorflow_lines(other) == []
