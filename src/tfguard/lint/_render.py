"""Showing lint findings: `render_lint` (rich) and `lint_to_json` / `lint_from_json`.

The library never prints on its own: `render_lint` writes to the
`rich.console.Console` it is given (the CLI passes its own; a test passes one
that records). The JSON form is the one a CI job or the diagnosis report reads.
Text from the model (layer and class names, messages quoting them) is shown
literally: rich `Text`, never markup, with control characters escaped.

JSON shape::

    {"version": 1,
     "counts": {"error": 1, "warning": 0, "info": 2},
     "findings": [{"id", "severity", "message", "where", "evidence", "suggestion"}, ...]}

Example:

from tfguard._findings import Finding
>>> f = Finding("label_range", "error", "Label 10 >= 10 units.", "labels", {"code": "x"}, "")
>>> lint_from_json(lint_to_json([f])) == [f]
True
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.text import Text

from tfguard._errors import ContractError
from tfguard._findings import SEVERITIES, Finding, strict_json
from tfguard._findings_table import count_text, show_findings

JSON_VERSION = 1

def _counts(findings) -> dict:
    counts = dict.fromkeys(reversed(SEVERITIES), 0)
    for f in findings:
        counts[f.severity] += 1
    return counts


def render_lint(findings: list[Finding], console: Console, *, title: str = "tfguard lint"):
    """Writes findings to a rich console as a table, worst first, with a count line.

    Example:

    >>> from rich.console import Console
    >>> console = Console(record=True, width=100)
    >>> render_lint([], console)
    No findings: model, data and pipeline look consistent.

    Args:
        findings: the findings to show.
        console: the `rich.console.Console` to write to.
        title: the table title. Defaults to `"tfguard lint"`.

    Raises:
        TypeError: if `console` is not a `rich.console.Console`.
    """
    if not isinstance(console, Console):
        raise TypeError(
            f"Received an invalid value for `console`, expected a rich.console.Console. "
            f"Received: console of type {type(console).__name__}"
        )
    findings = list(findings)
    if not findings:
        console.print(Text("No findings: model, data and pipeline look consistent.", "green"))
        return
    show_findings(console, findings, title=title)
    console.print(count_text(findings))


def lint_to_json(findings: list[Finding], *, indent: int | None = 2) -> str:
    """Serializes findings to JSON (strict: non-finite numbers become strings).

    Args:
        findings: the findings.
        indent: JSON indentation. Defaults to `2`.

    Returns:
        The JSON text, shaped as in the module docstring.
    """
    findings = list(findings)
    payload = {
        "version": JSON_VERSION,
        "counts": _counts(findings),
        "findings": [f.to_dict() for f in findings],
    }
    return json.dumps(strict_json(payload), indent=indent, allow_nan=False)


def lint_from_json(text: str) -> list[Finding]:
    """Reads findings back from `lint_to_json` output.

    Args:
        text: the JSON text.

    Returns:
        The findings, in order.

    Raises:
        ValueError: if the text is not JSON of the documented shape or version.
    """
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"Expected lint JSON. Received: text that is not JSON ({err})") from None
    if not isinstance(payload, dict) or payload.get("version") != JSON_VERSION:
        raise ValueError(
            f"Expected lint JSON of version {JSON_VERSION}. Received: "
            f"version={payload.get('version') if isinstance(payload, dict) else None!r}"
        )
    try:
        return [Finding.from_dict(item) for item in payload.get("findings", [])]
    except (TypeError, ContractError) as err:
        raise ValueError(f"Expected lint JSON findings. Received: {err}") from None
