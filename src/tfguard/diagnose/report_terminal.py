"""`render_terminal`: diagnoses as a rich terminal summary.

One block per run: its name, source and hyperparameters, the final and best
epoch metrics, a table of the symptoms (severity, id, layer, onset, what
was seen and what to try), and the rules that could not run with the
reason. Text from logs (run names, hparams, layer names, messages) is shown
literally: rich markup in it is not interpreted and control characters are
removed.

Example:

>>> import io
>>> from rich.console import Console
>>> from tfguard.diagnose import Signals, diagnose, render_terminal
>>> console = Console(record=True, width=120, file=io.StringIO())
>>> render_terminal([diagnose(Signals.from_arrays({"train/loss": (None, [2.3] * 5)}), rules=["no_learning"])], console)
>>> "no_learning" in console.export_text()
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfguard.diagnose.engine import Diagnosis
from tfguard.diagnose.finding import fmt

STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(value, limit: int = 300) -> str:
    """A log-supplied value as safe, bounded terminal text.

    Args:
        value: anything; it is converted with `str`.
        limit: the most characters kept. Defaults to `300`.

    Returns:
        The text without control characters, cut with `...` past `limit`.
    """
    text = _CONTROL.sub("?", str(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _metrics_line(d: Diagnosis) -> Text:
    text = Text()
    for tag, m in d.metrics.items():
        if text:
            text.append("   ")
        text.append(clean(tag, 60), style="bold")
        text.append(f" final {fmt(m['final'])}")
        if m["best"] is not None:
            where = f" @ epoch {m['best_epoch']}" if m["best_epoch"] is not None else ""
            text.append(f", best {fmt(m['best'])}{where}")
    return text


def render_run(d: Diagnosis, console: Console, *, show_skipped: bool = True) -> None:
    """Prints one run's diagnosis on `console`.

    Args:
        d: the run's diagnosis.
        console: the rich console to print on.
        show_skipped: list the rules that could not run. Defaults to `True`.
    """
    worst = d.worst
    title = Text()
    title.append("run ", style="bold")
    title.append(clean(d.run), style="bold magenta")
    title.append(f"  ({d.source})  ", style="dim")
    if worst is None:
        title.append("healthy: no symptom found", style="bold green")
    else:
        counts = {s: sum(1 for f in d.findings if f.severity == s) for s in ("error", "warning", "info")}
        title.append(", ".join(f"{n} {s}{'s' if n > 1 else ''}" for s, n in counts.items() if n),
                     style=STYLES[worst])
    console.print(title)
    if d.hparams:
        hp = Text("hparams: ", style="dim")
        hp.append(", ".join(f"{clean(k, 60)}={clean(v, 80)}" for k, v in d.hparams.items()))
        console.print(hp)
    if d.metrics:
        console.print(_metrics_line(d))
    if d.findings:
        table = Table(show_header=True, header_style="bold", expand=False, show_lines=True)
        for column in ("severity", "symptom", "where", "onset", "what was seen / what to try"):
            table.add_column(column, overflow="fold")
        for f in d.findings:
            body = Text(clean(f.message, 1000))
            if f.suggestion:
                body.append("\n→ " + clean(f.suggestion, 1000), style="green")
            table.add_row(Text(f.severity, style=STYLES[f.severity]), Text(f.id, style="bold"),
                          Text(clean(f.where or "-", 80)), Text(f.onset_text()), body)
        console.print(table)
    if show_skipped and d.rules_skipped:
        console.print(Text(f"not run ({len(d.rules_skipped)} rules, missing signals):", style="dim"))
        for s in d.rules_skipped:
            line = Text("  ")
            line.append(s["id"], style="dim bold")
            line.append(": " + clean(s["reason"], 400), style="dim")
            console.print(line)
    for note in d.notes:
        console.print(Text("note: " + clean(note, 400), style="dim italic"))


def render_terminal(diagnoses: Iterable[Diagnosis], console: Console, *,
                    show_skipped: bool = True) -> None:
    """Prints the diagnoses of several runs on `console`.

    Args:
        diagnoses: the runs' diagnoses.
        console: the rich console to print on.
        show_skipped: list the rules that could not run. Defaults to `True`.
    """
    diagnoses = list(diagnoses)
    if not diagnoses:
        console.print(Text("no runs found", style="yellow"))
        return
    for i, d in enumerate(diagnoses):
        if i:
            console.rule(style="dim")
        render_run(d, console, show_skipped=show_skipped)
