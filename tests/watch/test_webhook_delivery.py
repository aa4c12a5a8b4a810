"""What `tfguard watch --webhook` promises (issue 46, item 4), against real HTTP endpoints on 127.0.0.1.

`--once` waits for its events; errors are sent first and never dropped
before warnings and infos; a slow, trickling, redirecting or dead endpoint
is cut at the timeout, said on stderr and in the exit status (3); the URL is
said without its credentials, query and token path.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.watch.hooks import Recorder, Redirector, dead_url, serve, trickle
from tests.watch.logs import EVENT_FILE, append, epoch_records, losses
from tfguard._cli import main
from tfguard.watch import WatchEvent, WebhookOutput


def _diverging_runs(root, count: int) -> None:
    """`count` runs whose loss becomes NaN at epoch 2: a `run` and an error `finding` each."""
    for i in range(count):
        for epoch, loss in enumerate(losses(4, nan_at=2)):
            append(root / f"lr_{i:02d}" / EVENT_FILE, epoch_records(epoch, loss))


def test_once_waits_until_a_slow_endpoint_has_every_event(tmp_path, capsys):
    _diverging_runs(tmp_path, 12)
    with serve(Recorder, delay=0.08) as (base, received):
        status = main(["watch", str(tmp_path), "--once", "--json", "--webhook", base + "/hook",
                       "--webhook-timeout", "1"])
    kinds = [doc["event"] for doc in received]
    assert status == 0, capsys.readouterr().err
    assert kinds.count("run") == 12 and kinds.count("finding") == 12 and kinds[-1] == "summary"
    assert all(doc["severity"] == "error" for doc in received if doc["event"] == "finding")


def _event(severity: str, i: int) -> WatchEvent:
    kind = "finding" if severity != "info" else "run"
    return WatchEvent(kind, f"run_{i}", f"{severity} {i}", severity=severity)


def test_errors_are_sent_first_and_never_dropped_before_warnings_or_infos():
    gate = threading.Event()
    notices: list[str] = []
    with serve(Recorder, gate=gate) as (base, received):
        output = WebhookOutput(base + "/hook", queue_size=5, notice=notices.append)
        output.emit(_event("info", 0))  # in flight: the endpoint holds it until the gate opens
        time.sleep(0.3)
        for i in range(1, 11):
            output.emit(_event("info", i))
        output.emit(_event("warning", 11))
        for i in range(12, 15):
            output.emit(_event("error", i))
        gate.set()

        class Result:
            def to_json(self):
                return {"event": "summary"}

        lost = output.finish(Result())
    texts = [doc.get("text") for doc in received]
    assert texts[:5] == ["info 0", "error 12", "error 13", "error 14", "warning 11"], texts
    assert texts[-1] is None and received[-1]["event"] == "summary"
    assert lost == 9 and output.dropped == 9
    assert any("9 of 16 event(s) not delivered (9 info)" in n for n in notices), notices


def test_an_endpoint_answering_a_byte_at_a_time_is_cut_at_the_timeout():
    notices: list[str] = []
    with trickle() as url:
        output = WebhookOutput(url, timeout=0.6, retries=0, notice=notices.append)
        output.emit(_event("error", 1))
        began = time.monotonic()

        class Result:
            def to_json(self):
                return {"event": "summary"}

        lost = output.finish(Result())
        took = time.monotonic() - began
    assert output.sent == 0 and lost == 2 and took < 5, (output.sent, lost, took)
    assert any("no whole answer within 0.6 s" in n for n in notices), notices
    assert any("2 of 2 event(s) not delivered (1 error, 1 info)" in n for n in notices), notices


def test_a_redirect_is_refused_said_and_sets_the_exit_status(tmp_path, capsys):
    _diverging_runs(tmp_path, 1)
    with serve(Redirector) as (base, received):
        status = main(["watch", str(tmp_path), "--once", "--webhook", base + "/hook",
                       "--webhook-timeout", "1", "--webhook-wait", "10"])
    err = capsys.readouterr().err
    assert status == 3, err
    assert {method for method, _path in received} == {"POST"}  # never turned into a GET
    assert "HTTP 302: a redirect" in err and "not followed" in err
    assert "token=abc" not in err


def test_a_dead_endpoint_is_said_without_its_secrets_and_sets_the_exit_status(tmp_path, capsys):
    _diverging_runs(tmp_path, 1)
    url = dead_url("/services/T0SECRET/B0SECRET/XXXXSECRET").replace(
        "http://", "http://bot:pw-SECRET@") + "?token=SECRET"
    status = main(["watch", str(tmp_path), "--once", "--webhook", url, "--webhook-timeout", "1"])
    captured = capsys.readouterr()
    assert status == 3
    assert "SECRET" not in captured.err + captured.out
    assert "/services/…" in captured.err and "not delivered" in captured.err
    assert "event(s) not delivered" in captured.out  # the summary line says it too


@pytest.mark.parametrize("argv, named", [
    (["--webhook-timeout", "-1"], "timeout"), (["--webhook-timeout", "nan"], "timeout"),
    (["--webhook-timeout", "0"], "timeout"), (["--webhook-timeout", "inf"], "timeout"),
    (["--webhook-wait", "nan"], "wait"), (["--interval", "inf"], "interval"),
    (["--interval", "nan"], "interval"), (["--settle", "nan"], "settle"),
    (["--settle=-inf"], "settle")])
def test_out_of_range_seconds_are_one_error_line(tmp_path, capsys, argv, named):
    hook = ["--webhook", dead_url()] if named in ("timeout", "wait") else []
    assert main(["watch", str(tmp_path), "--once", *hook, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR") and f"`{named}`" in err and "Traceback" not in err


@pytest.mark.parametrize("url", ["http://[::1/hook", "http://host:99999/hook", "https:///hook",
                                 "ftp://user:SECRET@example.org/hook"])
def test_a_malformed_webhook_url_is_one_error_line_without_its_secrets(tmp_path, capsys, url):
    assert main(["watch", str(tmp_path), "--once", "--webhook", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR Received an invalid webhook URL") and "SECRET" not in err
