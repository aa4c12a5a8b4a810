"""One way to draw findings (`tfguard._findings_table`): lint, diagnose and `tfguard run` alike.

They used to differ: lint wrote `ERROR` and `Try:` with a count line of
zeros, diagnose `error` and `→` with counts in the title, and `tfguard run`
its own line. Each now goes through the one table, count line and line.
"""

from __future__ import annotations

from rich.console import Console

from tfguard._findings import Finding
from tfguard._findings_table import ARROW, count_text, finding_line, findings_table
from tfguard.diagnose import Signals, diagnose, render_terminal
from tfguard.lint import render_lint

FOUND = [
    Finding("pipeline_order", "info", "No prefetch.", where="PrefetchDataset",
            evidence={"code": "no_prefetch"}, suggestion="Add prefetch."),
    Finding("label_range", "error", "3 labels are >= 10.", where="labels",
            evidence={"code": "class_id_out_of_range"}, suggestion="Use 13 units.", onset_step=7),
    Finding("unnormalized_input", "warning", "Raw pixels.", where="input 'x'"),
]


def _text(*renderables, width=160) -> str:
    console = Console(record=True, width=width, color_system=None)
    for r in renderables:
        console.print(r)
    return console.export_text()


def test_the_table_is_worst_first_with_code_arrow_and_optional_onset():
    text = _text(findings_table(FOUND, title="t"))
    assert text.index("label_range") < text.index("unnormalized_input") < text.index("pipeline_order")
    assert "class_id_out_of_range" in text and ARROW + "Use 13 units." in text
    assert "onset" not in text
    assert "step 7" in _text(findings_table(FOUND, onset=True))


def test_the_count_line_names_only_what_is_there_worst_first():
    assert str(count_text(FOUND)) == "1 error, 1 warning, 1 info"
    assert str(count_text(FOUND[:1] * 2 + FOUND[2:] * 3)) == "3 warnings, 2 info"
    assert str(count_text([])) == ""


def test_a_line_escapes_what_came_from_the_model():
    finding = Finding("dead_relu", "warning", "dead", where="dense\x1b[2J")
    assert finding_line(finding) == "warning dead_relu (dense\\x1b[2J): dead"


def test_lint_and_diagnose_draw_a_finding_the_same_way():
    lint_console = Console(record=True, width=160, color_system=None)
    render_lint(FOUND, lint_console)
    lint_text = lint_console.export_text()
    signals = Signals.from_arrays({"train/loss": (None, [2.3] * 5)})
    diagnosis = diagnose(signals, rules=["no_learning"])
    diagnose_console = Console(record=True, width=160, color_system=None)
    render_terminal([diagnosis], diagnose_console)
    diagnose_text = diagnose_console.export_text()
    assert "1 error, 1 warning, 1 info" in lint_text
    found = diagnosis.findings[0]
    assert ARROW + found.suggestion.split()[0] in diagnose_text
    assert str(count_text(diagnosis.findings)) in diagnose_text
    for text in (lint_text, diagnose_text):
        assert "Try:" not in text and "ERROR" not in text
