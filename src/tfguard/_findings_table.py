"""Findings on a terminal, drawn one way: the table or the blocks, the count line, the one-line form.

`tfguard lint`, `tfguard diagnose` and `tfguard run` all show `Finding`s.
They show them alike: worst first, each severity in its colour
(`SEVERITY_STYLES`), the suggestion after an arrow (`ARROW`), and the counts
as `1 error, 2 warnings, 1 info`. The table is drawn on a terminal at
least `TABLE_MIN_WIDTH` wide; elsewhere (a pipe, a CI log, a narrow
terminal) each finding is a short block whose lines wrap at words
(`show_findings`). Text from a model or a log (names,
messages) is shown literally: rich `Text`, never markup, with control
characters escaped (`tfguard._text.clean`).

Example:

>>> import io
>>> from rich.console import Console
>>> from tfguard._findings import Finding
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

import textwrap
from collections.abc import Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfguard._findings import SEVERITIES, severity_rank
from tfguard._text import clean

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


def findings_table(findings: Iterable, *, title: str | None = None, onset: bool = False,
                   in_order: bool = False) -> Table:
    """The findings as a rich table: severity, symptom (and sub-code), where, what was seen and what to try.

    Args:
        findings: `Finding`s (lint's or a diagnosis rule's).
        title: the table's title. Defaults to `None`.
        onset: add an `onset` column (the step or epoch a symptom began).
            Defaults to `False`.
        in_order: keep the order given (a diagnosis lists the root cause
            first). Defaults to `False` (worst first).

    Returns:
        A `rich.table.Table`, worst finding first unless `in_order`.
    """
    table = Table(title=title, show_header=True, header_style="bold", expand=False, show_lines=True)
    columns = ["severity", "symptom", "where", *(["onset"] if onset else []),
               "what was seen / what to try"]
    for column in columns:
        table.add_column(column, overflow="fold")
    for f in list(findings) if in_order else worst_first(findings):
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


TABLE_MIN_WIDTH = 100
"""The narrowest terminal the table is drawn on; narrower, or not a terminal: `findings_blocks`."""


def finding_header(finding) -> str:
    """`severity id [code] in where, epoch E, step S`: what a finding is, on one short plain line.

    Example:

    >>> from tfguard._findings import Finding
    >>> finding_header(Finding("dead_relu", "warning", "dead.", where="dense", onset_step=40))
    'warning dead_relu in dense, step 40'
    """
    code = f" [{clean(finding.code, _NAME_LIMIT)}]" if finding.code else ""
    where = f" in {clean(finding.where, _NAME_LIMIT)}" if finding.where else ""
    onset = finding.onset_text() if hasattr(finding, "onset_text") else "-"
    return (f"{finding.severity} {clean(finding.id, _NAME_LIMIT)}{code}{where}"
            + (f", {onset}" if onset != "-" else ""))


def findings_blocks(findings: Iterable, *, width: int = 80, onset: bool = False,
                    in_order: bool = False) -> Text:
    """The findings as short blocks: a header line, the message, the fix, each wrapped at words.

    For a stream that is not a terminal (a CI log, `nohup`, a notebook's
    captured output) or a narrow one. Lines wrap at spaces under a
    two-space indent (`textwrap`, long words kept whole), so nothing is cut
    inside a word as a table's columns cut it, and no line ends in padding.

    Example:

    >>> from tfguard._findings import Finding
    >>> f = Finding("dead_relu", "warning", "82% of the units of layer 'dense' are dead.",
    ...             where="dense", suggestion="Use LeakyReLU.", onset_step=40)
    >>> print(findings_blocks([f], width=30, onset=True))
    warning dead_relu in dense, step 40
      82% of the units of layer
      'dense' are dead.
      → Use LeakyReLU.

    Args:
        findings: `Finding`s (lint's or a diagnosis rule's).
        width: the column lines wrap before. Defaults to `80`.
        onset: say when each symptom began. Defaults to `False`.
        in_order: keep the order given (a diagnosis lists the root cause first);
            else worst first. Defaults to `False`.

    Returns:
        One `rich.text.Text`, the header of each block in its severity's colour.
    """
    out = Text()
    wrap = max(20, int(width) - 2)
    for i, f in enumerate(list(findings) if in_order else worst_first(findings)):
        if i:
            out.append("\n\n")
        out.append(f.severity, style=SEVERITY_STYLES[f.severity])
        out.append(" ")
        out.append(clean(f.id, _NAME_LIMIT), style="bold")
        if f.code:
            out.append(f" [{clean(f.code, _NAME_LIMIT)}]", style="dim")
        if f.where:
            out.append(f" in {clean(f.where, _NAME_LIMIT)}")
        if onset and hasattr(f, "onset_text") and f.onset_text() != "-":
            out.append(f", {f.onset_text()}", style="dim")
        out.append("\n" + _wrapped(clean(f.message, _MESSAGE_LIMIT, newlines=True), wrap))
        if f.suggestion:
            out.append("\n" + _wrapped(ARROW + clean(f.suggestion, _MESSAGE_LIMIT, newlines=True), wrap),
                       style="green")
    return out


def _wrapped(text: str, width: int) -> str:
    return "\n".join(textwrap.fill(part, width, initial_indent="  ", subsequent_indent="  ",
                                    break_long_words=False, break_on_hyphens=False)
                     for part in text.splitlines() or [""])


def show_findings(console: Console, findings: Iterable, *, title: str | None = None,
                  onset: bool = False, in_order: bool = False) -> None:
    """Prints the findings on `console`: the table on a wide terminal, else `findings_blocks`.

    Args:
        console: the rich console.
        findings: the findings.
        title: a title above them. Defaults to `None`.
        onset: say when each symptom began. Defaults to `False`.
        in_order: keep the order given (root cause first), else worst first. Defaults to `False`.
    """
    findings = list(findings)
    if console.is_terminal and console.width >= TABLE_MIN_WIDTH:
        console.print(findings_table(findings, title=title, onset=onset, in_order=in_order))
        return
    if title:
        console.print(Text(title, style="bold"))
    console.print(findings_blocks(findings, width=console.width, onset=onset, in_order=in_order),
                  soft_wrap=True)


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


__all__ = ["ARROW", "SEVERITY_STYLES", "TABLE_MIN_WIDTH", "count_text", "finding_header", "finding_line",
           "findings_blocks", "findings_table", "show_findings", "worst_first"]
