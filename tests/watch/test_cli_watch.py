"""`tfguard watch` as users run it: `--once`, `--exit-on`, `--json`, `--webhook`, Ctrl-C.

The command runs in its own process where the test needs a process (Ctrl-C,
no TensorFlow import); the webhook is a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from rich.console import Console

from tests.terminal import sigint_default
from tests.watch.logs import EVENT_FILE, append, epoch_records, losses
from tfguard._cli import main
from tfguard.watch import WebhookOutput, watch_logdir
from tfguard.watch._terminal import TerminalOutput

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def logdir(tmp_path):
    """A run whose loss becomes NaN at epoch 5 (step 51) and a healthy one."""
    for epoch, loss in enumerate(losses(8, nan_at=5)):
        append(tmp_path / "lr_10" / EVENT_FILE, epoch_records(epoch, loss))
        append(tmp_path / "lr_0.01" / EVENT_FILE, epoch_records(epoch, 2.3 * 0.7 ** epoch))
    return tmp_path


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "src"), env.get("PYTHONPATH", "")])
    return env


def test_once_json_lines_parse_and_exit_on_sets_the_status(logdir, capsys):
    assert main(["watch", str(logdir), "--once", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(d["event"], d.get("run")) for d in lines] == [
        ("run", "lr_0.01"), ("run", "lr_10"), ("finding", "lr_10"), ("summary", None)]
    assert lines[2]["finding"]["id"] == "nonfinite" and lines[2]["severity"] == "error"
    assert lines[2]["step"] == 51 and lines[2]["finding"]["suggestion"]
    assert main(["watch", str(logdir), "--once", "--exit-on", "error"]) == 1
    out = capsys.readouterr().out
    assert "nonfinite" in out and "fix: " in out and "stopped at the first finding" in out
    assert main(["watch", str(logdir / "lr_0.01"), "--once", "--exit-on", "warning"]) == 0


def test_the_terminal_header_says_once_or_the_interval(logdir, capsys):
    assert main(["watch", str(logdir), "--once"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("looking once at ") and "Ctrl-C" not in first
    shown = io.StringIO()
    watch_logdir(logdir, interval=2, outputs=[TerminalOutput(Console(file=shown, soft_wrap=True))], max_polls=1,
                 sleep=lambda seconds: None)
    assert shown.getvalue().splitlines()[0] == f"watching {logdir} every 2 s (Ctrl-C stops it)"


def test_once_on_a_missing_logdir_is_one_error_line(tmp_path, capsys):
    assert main(["watch", str(tmp_path / "nope"), "--once"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR") and "does not exist" in err


class _Hook(http.server.BaseHTTPRequestHandler):
    received: list = []
    fail_first = 0  # answer this many POSTs with HTTP 503 first
    tries = 0

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).tries += 1
        if type(self).tries <= type(self).fail_first:
            self.send_response(503)
            self.end_headers()
            return
        type(self).received.append((self.headers["Content-Type"], json.loads(body)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hook():
    _Hook.received, _Hook.fail_first, _Hook.tries = [], 0, 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", _Hook.received
    server.shutdown()
    server.server_close()


def _dead_url() -> str:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/hook"


def test_the_webhook_gets_each_event_as_json_and_a_dead_one_does_not_stop_the_watch(
        logdir, hook, capsys):
    url, received = hook
    status = main(["watch", str(logdir), "--once", "--webhook", _dead_url(), "--webhook", url,
                   "--webhook-timeout", "2"])
    assert status == 3  # the dead one's events were not delivered
    assert {kind for kind, _ in received} == {"application/json"}
    events = [doc["event"] for _, doc in received]
    assert sorted(events[:3]) == ["finding", "run", "run"] and events[3:] == ["summary"]
    finding = next(doc for _, doc in received if doc["event"] == "finding")
    assert (finding["run"], finding["finding"]["id"], finding["step"]) == ("lr_10", "nonfinite", 51)
    captured = capsys.readouterr()
    assert "failed after 3 tries" in captured.err and "the watch goes on" in captured.err
    assert "4 of 4 event(s) not delivered (1 error, 3 info)" in captured.err
    assert "tfguard watch: one pass" in captured.out and "4 event(s) not delivered" in captured.out


def test_a_webhook_that_fails_twice_gets_the_event_on_the_third_try(logdir, hook):
    url, received = hook
    _Hook.fail_first = 2
    notices = []
    output = WebhookOutput(url, retries=2, backoff=0.05, notice=notices.append)
    result = watch_logdir(logdir / "lr_10", once=True, outputs=[output])
    assert result.exit_code == 0
    assert [doc["event"] for _, doc in received] == ["finding", "run", "summary"]  # errors first
    assert _Hook.tries == 5 and (output.sent, output.failed) == (3, 0) and notices == []


def test_a_failing_webhook_never_stops_the_polls(logdir):
    failing = WebhookOutput(_dead_url(), timeout=1, retries=1, backoff=0.05)
    result = watch_logdir(logdir, interval=0.05, max_polls=4, outputs=[failing])
    assert (result.reason, result.polls, result.exit_code) == ("polls", 4, 3)  # 3: not delivered
    assert failing.sent == 0 and failing.failed >= 1


@pytest.mark.parametrize("stop, said", [(signal.SIGINT, "interrupted"),
                                        (signal.SIGTERM, "terminated")])
def test_ctrl_c_or_sigterm_prints_a_one_line_summary_and_exits_0(logdir, stop, said):
    watch = subprocess.Popen(
        [sys.executable, "-m", "tfguard", "watch", str(logdir), "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT,
        preexec_fn=sigint_default)
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = watch.stdout.readline()
            lines.append(line)
            if "fix:" in line:
                break
        assert any("nonfinite" in line for line in lines), lines
        time.sleep(0.5)  # a few more polls: nothing new is said
        watch.send_signal(stop)
        out, err = watch.communicate(timeout=30)
    finally:
        if watch.poll() is None:
            watch.kill()
    assert watch.returncode == 0, err
    rest = [line for line in out.splitlines() if line.strip()]
    assert len(rest) == 1 and rest[0].startswith(f"tfguard watch: {said} after")
    assert "2 runs, 1 finding open (1 error)" in rest[0]
    assert "Traceback" not in err


def test_watch_imports_no_tensorflow(logdir):
    code = ("import sys\nfrom tfguard._cli import main\nstatus = main(sys.argv[1:])\n"
            "print('LOADED', sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code, "watch", str(logdir), "--once"],
                          capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("LOADED []") and done.stderr == ""
