"""Whole-file writes (issue 26, item 7): a write cut short leaves the old file whole.

The reports are written by a child process under a file-size limit
(`RLIMIT_FSIZE`, SIGXFSZ ignored so the write fails with EFBIG instead of
killing the child), over a good report written before: the good report
must still be there byte for byte, with no temporary file beside it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tfguard._files import unique_path, write_atomic

from .events.eventdata import scalar_event, write_framed

LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
{body}
"""

REPORT = """
from tfguard._cli import main
sys.exit(main(["report", sys.argv[2], "-o", sys.argv[3]]))
"""

REPORT_JSON = """
from tfguard.attach._report import write_report
write_report({"format": "x", "runs": ["a" * 100000]}, sys.argv[3])
"""

META = """
from tfguard._files import write_atomic
write_atomic(sys.argv[3], "{" + "1" * 100000 + "}")
"""


def _logdir(tmp_path) -> str:
    run = tmp_path / "logs" / "run-a"
    run.mkdir(parents=True)
    write_framed(str(run / "events.out.tfevents.1.host"),
                 [scalar_event("train/loss", step, 1.0 / (step + 1)) for step in range(1, 6)])
    return str(tmp_path / "logs")


def _run_limited(body: str, limit: int, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", LIMITED.format(body=body), str(limit), *args],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("body", [REPORT, REPORT_JSON, META], ids=["report.html", "report.json", "meta.json"])
def test_a_write_cut_short_by_a_size_limit_keeps_the_old_file(tmp_path, body):
    target = tmp_path / "out" / "report"
    target.parent.mkdir()
    good = b"<p>the good report of yesterday</p>\n" * 20
    target.write_bytes(good)
    limit = 4096  # the new file is larger than this; the old one is smaller
    done = _run_limited(body, limit, _logdir(tmp_path), str(target))
    assert done.returncode != 0, done.stdout + done.stderr
    assert target.read_bytes() == good
    assert sorted(os.listdir(target.parent)) == ["report"]  # no temporary file left behind


def test_the_report_command_says_why_it_could_not_write(tmp_path):
    target = tmp_path / "report.html"
    done = _run_limited(REPORT, 4096, _logdir(tmp_path), str(target))
    assert done.returncode == 2
    assert "ERROR" in done.stderr and "File too large" in done.stderr
    assert "Traceback" not in done.stderr
    assert not target.exists()


def test_write_atomic_replaces_whole_and_keeps_the_usual_mode(tmp_path):
    path = tmp_path / "sub" / "meta.json"
    write_atomic(path, "first")
    write_atomic(path, b"second")
    assert path.read_text() == "second"
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask
    assert os.listdir(path.parent) == ["meta.json"]


def test_unique_path_counts_on_from_2_and_never_reuses_a_folder(tmp_path):
    assert unique_path(tmp_path, "run") == str(tmp_path / "run")
    assert not (tmp_path / "run").exists()  # only the name is chosen
    made = [unique_path(tmp_path, "run", create=True) for _ in range(3)]
    assert [os.path.basename(p) for p in made] == ["run", "run-2", "run-3"]
    assert all(os.path.isdir(p) for p in made)
    (tmp_path / "run-4").write_text("a file takes the name too")
    assert unique_path(tmp_path, "run") == str(tmp_path / "run-5")
    assert unique_path(tmp_path / "new" / "root", "batch", create=True).endswith("batch")
