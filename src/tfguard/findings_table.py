"""Findings on a terminal, drawn one way: the table, the count line, the one-line form.

`tfguard lint`, `tfguard diagnose` and `tfguard run` all show `Finding`s.
They show them alike: worst first, each severity in its colour
(`SEVERITY_STYLES`), the suggestion after an arrow (`ARROW`), and the counts
as `1 error, 2 warnings, 1 info`. Text from a model or a log (names,
messages) is shown literally: rich `Text`, never markup, with control
characters escaped (`tfguard.text.clean`).

Example:

>>> import io
>>> from rich.console import Console
>>> from tfguard.findings import Finding
>>> found = [Finding("dead_relu", "warning", "82% of units are dead", where="dense",
...                  suggestion="use LeakyReLU", onset_step=40),
...          Finding("nonfinite", "error", "loss is NaN", onset_step=41)]
>>> console = Console(record=True, width=100, color_system=None, file=io.StringIO())
>>> console.print(findings_table(found, onset=True))
>>> text = console.export_text()
>>> text.index("nonfinite") < text.index("dead_relu"), "→ use LeakyReLU" in text, "step 40" in text
(True, True, True)
>>> str(count_text(found))
'1 error, 1 warning'
>>> finding_line(found[0])
'warning dead_relu (dense): 82% of units are dead'
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from rich.text import Text

from tfguard.findings import SEVERITIES, severity_rank
from tfguard.text import clean

SEVERITY_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}
"""The rich style of each severity, wherever a severity is shown."""
ARROW = "→ "
"""What stands before a finding's suggestion."""
_MESSAGE_LIMIT = 1000
_NAME_LIMIT = 80


def worst_first(findings: Iterable) -> list:
    """The findings ordered by severity, worst first (in their order within one severity)."""
    return sorted(findings, key=lambda f: -severity_rank(f.severity))


def count_text(findings: Iterable) -> Text:
    """`1 error, 2 warnings, 1 info`: the non-zero counts, worst first, each in its colour.

    Args:
        findings: the findings counted.

    Returns:
        The counts as rich `Text` (empty for no finding).
    """
    counts = dict.fromkeys(reversed(SEVERITIES), 0)
    for f in findings:
        counts[f.severity] += 1
    text = Text()
    for severity, n in counts.items():
        if n:
            if text:
                text.append(", ")
            plural = "s" if n != 1 and severity != "info" else ""
            text.append(f"{n} {severity}{plural}", style=SEVERITY_STYLES[severity])
    return text


def findings_table(findings: Iterable, *, title: str | None = None, onset: bool = False) -> Table:
    """The findings as a rich table: severity, symptom (and sub-code), where, what was seen and what to try.

    Args:
        findings: `Finding`s (lint's or a diagnosis rule's).
        title: the table's title. Defaults to `None`.
        onset: add an `onset` column (the step or epoch a symptom began).
            Defaults to `False`.

    Returns:
        A `rich.table.Table`, worst finding first.
    """
    table = Table(title=title, show_header=True, header_style="bold", expand=False, show_lines=True)
    columns = ["severity", "symptom", "where", *(["onset"] if onset else []),
               "what was seen / what to try"]
    for column in columns:
        table.add_column(column, overflow="fold")
    for f in worst_first(findings):
        body = Text(clean(f.message, _MESSAGE_LIMIT, newlines=True))
        if f.suggestion:
            body.append("\n" + ARROW + clean(f.suggestion, _MESSAGE_LIMIT, newlines=True),
                        style="green")
        symptom = Text(clean(f.id, _NAME_LIMIT), style="bold")
        if f.code:
            symptom.append("\n" + clean(f.code, _NAME_LIMIT), style="dim")
        cells = [Text(f.severity, style=SEVERITY_STYLES[f.severity]), symptom,
                 Text(clean(f.where or "-", _NAME_LIMIT))]
        if onset:
            cells.append(Text(f.onset_text()))
        table.add_row(*cells, body)
    return table


def finding_line(finding) -> str:
    """One finding on one plain line: `severity id (where): message` (a progress message).

    Args:
        finding: a `Finding`.

    Returns:
        The line, control characters escaped.
    """
    where = f" ({clean(finding.where, _NAME_LIMIT)})" if finding.where else ""
    return (f"{finding.severity} {clean(finding.id, _NAME_LIMIT)}{where}: "
            f"{clean(finding.message, _MESSAGE_LIMIT, newlines=True)}")


__all__ = ["ARROW", "SEVERITY_STYLES", "count_text", "finding_line", "findings_table", "worst_first"]
