"""The tfguard tab in a real `tensorboard` process: listed as active, its routes answer each kind of run."""

from __future__ import annotations

import os
import re

import pytest

from tfguard.diagnose import diagnose_logdir, to_json

from .conftest import HOSTILE_HPARAM, RUNS, get, get_json

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def answer(tensorboard):
    """The `runs` route's document, by run name."""
    doc = get_json(tensorboard + "/data/plugin/tfguard/runs")
    return doc, {run["run"]: run for run in doc["runs"]}


def test_plugins_listing_shows_the_tab_active_as_an_iframe_of_its_own_module(tensorboard):
    listing = get_json(tensorboard + "/data/plugins_listing")
    tab = listing["tfguard"]
    assert tab["enabled"] is True
    assert tab["tab_name"] == "tfguard"
    assert tab["loading_mechanism"]["type"] == "IFRAME"
    assert tab["loading_mechanism"]["module_path"].endswith("/data/plugin/tfguard/index.js")


def test_the_frontend_is_served_by_the_plugin_and_loads_nothing_from_elsewhere(tensorboard):
    status, body, kind = get(tensorboard + "/data/plugin_entry.html?name=tfguard")
    assert status == 200 and b'<base href="plugin/tfguard/"' in body and b"index.js" in body
    status, script, kind = get(tensorboard + "/data/plugin/tfguard/index.js")
    assert status == 200 and kind.startswith("text/javascript")
    assert b"export async function render" in script
    status, css, kind = get(tensorboard + "/data/plugin/tfguard/style.css")
    assert status == 200 and kind.startswith("text/css")
    for text in (script, css):
        assert not re.search(rb"https?://(?!www\.w3\.org/2000/svg)", text)  # no CDN, no other host
    assert b"innerHTML" not in script and b"insertAdjacentHTML" not in script


def test_every_run_is_answered_with_the_words_of_tfguard_diagnose(answer, board_logdir):
    doc, runs = answer
    expected = {r["run"]: r for r in to_json(diagnose_logdir(board_logdir))["runs"]}
    assert set(runs) == set(expected) == set(RUNS.values())
    for name, run in runs.items():
        for key in ("status", "healthy", "hparams", "symptoms", "source"):
            assert run[key] == expected[name][key], (name, key)


def test_healthy_run_says_healthy(answer):
    run = answer[1][RUNS["healthy"]]
    assert run["kind"] == "healthy" and run["healthy"] is True
    assert run["headline"] == "healthy: no symptom found" and run["symptoms"] == []


def test_buggy_run_lists_its_root_cause_first_with_layer_onset_evidence_and_fix(answer):
    run = answer[1][RUNS["buggy"]]
    assert run["kind"] == "error"
    root, *rest = run["symptoms"]
    assert (root["id"], root["where"], root["cause"]) == ("dead_relu", "hidden_1", None)
    assert root["onset_step"] is not None and root["evidence"] and root["suggestion"]
    assert rest and all(f["cause"] == ["dead_relu", "hidden_1"] for f in rest)


def test_stock_keras_run_is_read_as_a_keras_run(answer):
    run = answer[1][RUNS["stock"]]
    assert run["source"] == "keras"
    assert [f["id"] for f in run["symptoms"]] == ["no_learning"]
    # most rules could not look, and what was found outranks it: an error, never healthy
    assert run["kind"] == "error" and "little evidence" in run["headline"]
    assert run["updated"] is not None  # its event files are in train/ and validation/


def test_guarded_run_lists_its_violations_with_quarantine_folders_and_replay(answer):
    run = answer[1][RUNS["guarded"]]
    assert run["violation_count"] == len(run["violations"]) == 4  # 2 NaN batches x 2 epochs
    for v in run["violations"]:
        assert (v["stage"], v["action"]) == ("data", "skipped")
        assert v["quarantine"] and os.path.isdir(v["quarantine"])
        assert v["replay"] and "hidden" in v["replay"]
        assert v["values"].startswith("8 NaN")
    assert [v["batch"] for v in run["violations"]] == [1, 5, 9, 13]
    loss = run["loss"]  # the curve the timeline draws them on
    assert loss["tag"] == "batch/loss" and len(loss["steps"]) == len(loss["values"]) > 4
    assert loss["steps"][0] <= run["violations"][0]["step"] <= run["violations"][-1]["step"] <= loss["steps"][-1]
    assert answer[1][RUNS["healthy"]]["loss"] is None  # no violation, no timeline


def test_several_runs_are_ranked(answer):
    doc, runs = answer
    ranking = doc["ranking"]
    assert ranking["sort_by"] == "val/accuracy"
    assert sorted(r["run"] for r in ranking["rows"]) == sorted(runs)
    assert [r["rank"] for r in ranking["rows"]] == list(range(1, len(runs) + 1))
    assert {r["run"]: r["summary"] for r in ranking["rows"]}[RUNS["healthy"]] == "healthy"


def test_one_run_route_and_its_errors(tensorboard):
    base = tensorboard + "/data/plugin/tfguard/run"
    from urllib.parse import quote

    run = get_json(f"{base}?run={quote(RUNS['hostile'])}")
    assert run["run"] == RUNS["hostile"] and run["hparams"]["note"] == HOSTILE_HPARAM
    status, body, _ = get(base)
    assert status == 400 and b"Expected a run name" in body
    status, body, _ = get(base + "?run=nope")
    assert status == 404 and b"No run 'nope'" in body
