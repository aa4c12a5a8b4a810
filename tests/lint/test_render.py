import json

import pytest
from rich.console import Console

from tfguard._findings import Finding
from tfguard.lint._render import lint_from_json, lint_to_json, render_lint

FINDINGS = [
    Finding(
        "pipeline_order",
        "info",
        "No prefetch.",
        "PrefetchDataset",
        {"code": "no_prefetch"},
        "Add prefetch.",
    ),
    Finding(
        "label_range",
        "error",
        "3 labels are >= 10.",
        "labels of output 'dense'",
        {"code": "class_id_out_of_range", "max": 12, "ratio": float("inf")},
        "Use 13 units.",
    ),
    Finding(
        "unnormalized_input", "warning", "Raw pixels.", "input 'x'", {"code": "raw_pixels"}, ""
    ),
]


def test_render_shows_worst_first_with_fix_and_counts():
    console = Console(record=True, width=160, color_system=None)
    render_lint(FINDINGS, console)
    text = console.export_text()
    assert text.index("label_range") < text.index("unnormalized_input") < text.index("pipeline_order")
    assert "class_id_out_of_range" in text and "→ Use 13 units." in text
    assert "1 error, 1 warning, 1 info" in text


def test_render_nothing():
    console = Console(record=True, width=100)
    render_lint([], console)
    assert "No findings" in console.export_text()


def test_render_needs_a_console():
    with pytest.raises(TypeError, match="rich.console.Console"):
        render_lint(FINDINGS, print)


def test_json_is_strict_and_round_trips():
    text = lint_to_json(FINDINGS)
    payload = json.loads(text)
    assert payload["version"] == 1
    assert payload["counts"] == {"error": 1, "warning": 1, "info": 1}
    assert payload["findings"][1]["evidence"]["ratio"] == "Infinity"  # the one strict-JSON spelling
    assert lint_from_json(text) == FINDINGS
    assert json.loads(lint_to_json([]))["findings"] == []


@pytest.mark.parametrize("text", ["not json", '{"version": 99, "findings": []}', "[]"])
def test_bad_json_raises(text):
    with pytest.raises(ValueError, match="Expected lint JSON"):
        lint_from_json(text)
