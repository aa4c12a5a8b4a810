"""Distinct tags cannot amplify the reader's memory (issue 26, item 5).

A file of one-point scalars under 10^6 distinct tags took `tfguard
diagnose` to 2.5 GB and 69 s. The reader now keeps at most `MAX_TAGS` tags
per run; the values of later tags are counted and reported as damage, and
tfguard's own tags (`run/`, `config/`, `guard/`, hparams) are always read.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tensorboard.compat.proto import event_pb2, types_pb2

from tests.events.eventdata import scalar_event
from tfguard.events import _collect
from tfguard.events._records import frame_record
from tfguard.events._run import read_run

MEASURE = """
import sys, time
from tfguard._cli import main
start = time.perf_counter()
status = main(["diagnose", sys.argv[1]])
seconds = time.perf_counter() - start
# VmHWM: this process's peak RSS (ru_maxrss would count the forking parent's, kept across exec)
with open("/proc/self/status") as handle:
    peak = next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:"))
print("MEASURED", status, peak, seconds)
"""


def _one_point_tags(path: str, count: int, tail: bytes = b"") -> None:
    """`count` one-point float32 scalars, each under its own tag `tag/NNNNNNNN`."""
    template = scalar_event("T" * 12, 1, 0.5).SerializeToString()
    cut = template.index(b"T" * 12)
    head, rest = template[:cut], template[cut + 12:]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        for start in range(0, count, 65536):
            handle.write(b"".join(frame_record(head + b"tag/%08d" % k + rest)
                                  for k in range(start, min(count, start + 65536))))
        handle.write(tail)


def _text_record(tag: str, text: str, step: int) -> bytes:
    """A text summary as `tf.summary.text` writes it (a string tensor, plugin "text")."""
    event = event_pb2.Event(step=step, wall_time=1000.0)
    value = event.summary.value.add(tag=tag)
    value.tensor.dtype = types_pb2.DT_STRING
    value.tensor.string_val.append(text.encode())
    value.metadata.plugin_data.plugin_name = "text"
    return frame_record(event.SerializeToString())


def test_tags_past_the_cap_are_counted_as_damage_and_own_tags_still_read(tmp_path, monkeypatch):
    monkeypatch.setattr(_collect, "MAX_TAGS", 100)
    path = str(tmp_path / "run" / "events.out.tfevents.1.host")
    _one_point_tags(path, 300, tail=_text_record("run/status", '{"status": "completed"}', 9))
    run = read_run(str(tmp_path / "run"))
    assert len(run.scalars) == 100 and "tag/00000099" in run.scalars
    assert run.texts["run/status"][0][2] == '{"status": "completed"}'
    (damage,) = run.damage
    assert damage.lost_data and damage.kind == "oversized" and damage.path == path
    assert "more than 100 distinct tags in the run: 200 value(s) of later tags were not read" \
        in damage.reason
    assert damage.offset == 100 * len(frame_record(scalar_event("tag/00000000", 1, 0.5)
                                                   .SerializeToString()))


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="peak RSS read from /proc")
def test_a_million_one_point_tags_stay_within_300_mb(tmp_path):
    logdir = tmp_path / "logs"
    _one_point_tags(str(logdir / "run" / "events.out.tfevents.1.host"), 1_000_000)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", MEASURE, str(logdir)], capture_output=True,
                          text=True, env=env, timeout=300)
    line = [x for x in done.stdout.splitlines() if x.startswith("MEASURED")][-1]
    _, status, max_rss_kb, seconds = line.split()
    assert int(status) == 2  # damage: tags past the cap were not read
    assert "950,000 value(s) of later tags were not read" in done.stderr
    assert int(max_rss_kb) < 300 * 1024, max_rss_kb
    assert float(seconds) < 60, seconds


def test_tfguard_own_tags_past_the_cap_are_bounded_too(tmp_path, monkeypatch):
    monkeypatch.setattr(_collect, "MAX_TAGS", 100)
    monkeypatch.setattr(_collect, "MAX_OWN_TAGS", 10)
    path = str(tmp_path / "run" / "events.out.tfevents.1.host")
    own = b"".join(_text_record(f"guard/x{k}", "-", 1) for k in range(50))
    _one_point_tags(path, 300, tail=own + _text_record("run/status", "{}", 9))
    run = read_run(str(tmp_path / "run"))
    assert len(run.scalars) == 100 and len(run.texts) == 10  # not 51: a crafted file cannot grow it
    (damage,) = run.damage
    assert "241 value(s) of later tags were not read" in damage.reason  # 200 scalars, 41 texts
