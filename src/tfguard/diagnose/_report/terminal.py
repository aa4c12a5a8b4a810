"""`render_terminal`: diagnoses as a rich terminal summary.

One block per run: its name, source and hyperparameters, its training
phases (a model compiled again between its fits), the final and best
epoch metrics, a table of the symptoms (severity, id, layer, onset, what
was seen and what to try), and the rules that could not run with the
reason. Text from logs (run names, hparams, layer names, messages) is shown
literally: it goes into rich `Text` objects, never markup, so `[bold]` in a
name prints as written, and control characters (ESC, BEL, newlines) are
shown escaped (`tfguard._text.printable`), so a name cannot break a table or
drive the terminal. A run whose event files held nothing readable is shown
as unreadable, with the damage notes (file and offset), not as healthy.

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

from collections.abc import Iterable

from rich.console import Console
from rich.text import Text

from tfguard._findings import fmt
from tfguard._findings_table import SEVERITY_STYLES, count_text, show_findings
from tfguard._text import clean
from tfguard.diagnose._engine import Diagnosis
from tfguard.diagnose._inputs.normalize import DAMAGE_NOTES


def unreadable(d: Diagnosis) -> bool:
    """Whether the run is listed only for its damaged files (nothing in them could be read)."""
    s = d.signals
    return (s is not None and not (s.scalars or s.histograms or s.texts)
            and any(str(n).startswith(DAMAGE_NOTES) for n in d.notes))


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


def phase_line(phase: dict) -> str:
    """One training phase in words.

    Example:

    >>> phase_line({"phase": 2, "first_step": 31, "optimizer": "Adam", "learning_rate": 1e-4,
    ...             "trainable_variables": 4, "trainable_parameters": 2410})
    'phase 2 from step 31: Adam, learning rate 1.00e-04, 4 trainable variables (2410 parameters)'
    """
    rate = phase.get("learning_rate")
    return (f"phase {phase.get('phase')} from step {phase.get('first_step')}: {phase.get('optimizer')}, "
            f"learning rate {fmt(rate) if isinstance(rate, (int, float)) else 'unknown'}, "
            f"{phase.get('trainable_variables')} trainable variables "
            f"({phase.get('trainable_parameters')} parameters)")


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
    title.append(f"  ({clean(d.source, 40)})  ", style="dim")
    state = d.status.get("state", "completed")
    if unreadable(d):
        title.append("unreadable: its event files are damaged", style="bold red")
    elif state == "little_evidence":  # the run completed; the rules mostly could not look
        title.append(clean(d.status.get("text", state), 300), style="bold yellow")
        if worst is not None:
            title.append("; findings below", style=SEVERITY_STYLES[worst])
    elif state != "completed":
        title.append(clean(d.status.get("text", state), 300), style="bold red")
        if worst is not None:
            title.append("; findings below", style=SEVERITY_STYLES[worst])
    elif worst is None:
        title.append("healthy: no symptom found", style="bold green")
    else:
        title.append(count_text(d.findings))
    console.print(title)
    if d.hparams:
        hp = Text("hparams: ", style="dim")
        hp.append(", ".join(f"{clean(k, 60)}={clean(v, 80)}" for k, v in d.hparams.items()))
        console.print(hp)
    for phase in d.phases:
        console.print(Text(clean(phase_line(phase), 300), style="dim"))
    if d.metrics:
        console.print(_metrics_line(d))
    if d.findings:
        show_findings(console, d.findings, onset=True, in_order=True)
    if show_skipped and d.rules_skipped and not unreadable(d):
        console.print(Text(f"not run ({len(d.rules_skipped)} rules, missing signals):", style="dim"))
        for s in d.rules_skipped:
            line = Text("  ")
            line.append(s["id"], style="dim bold")
            line.append(": " + clean(s["reason"], 400), style="dim")
            console.print(line)
    for note in d.notes:
        damaged = str(note).startswith(DAMAGE_NOTES)
        console.print(Text("note: " + clean(note, 400), style="yellow" if damaged else "dim italic"))


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
