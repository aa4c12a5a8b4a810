"""`render_result`: the end of an attached run, for a person.

First what Python itself would have printed at the end of the script (the
traceback of an uncaught exception, or the text of `sys.exit("text")`),
unchanged; then the diagnosis of every `fit()` call
(`tfguard.diagnose.render_terminal`), the firewall's violations (the first
few), the notes, and where the logs and reports are. `tfguard run` prints
it on stderr, so the script's stdout stays the script's.

Example:

>>> import io
>>> from rich.console import Console
>>> from tfguard.attach import AttachResult
>>> console = Console(file=io.StringIO(), width=100)
>>> render_result(AttachResult(0, [], None, None, None, script="t.py"), console)
>>> "no fit() call" in console.file.getvalue()
True
"""

from __future__ import annotations

import os

from rich.text import Text

from tfguard._text import printable
from tfguard.diagnose import render_terminal
from tfguard.diagnose._report.terminal import clean

EVENTS_SHOWN = 3


def _shown(path: str) -> str:
    """A path relative to the working directory when it lies under it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def render_result(result, console) -> None:
    """Prints an `AttachResult` on a rich console.

    Args:
        result: the `AttachResult` of `run_script`.
        console: the rich console (the CLI's writes to stderr).
    """
    if result.traceback:
        console.out(printable(result.traceback), end="", highlight=False)
    if result.exit_message:
        console.out(printable(result.exit_message), highlight=False)
    console.rule(Text(f"tfguard: {clean(result.script, 120)}", style="bold"), style="dim")
    if result.diagnoses:
        render_terminal(result.diagnoses, console)
    else:
        console.print(Text("no fit() call was diagnosed", style="yellow"))
    for fit in result.fits:
        for note in fit.notes:
            console.print(Text(f"note: {clean(fit.run, 120)}: {clean(note, 400)}", style="dim italic"))
    events = result.guard_events
    if events:
        console.print(Text(f"firewall: {len(events)} violation(s)", style="yellow"))
        for run, event in events[:EVENTS_SHOWN]:
            first = event.message.splitlines()[0] if event.message else ""
            console.print(Text(f"  {clean(run, 120)}: {clean(event.action, 20)}: {clean(first, 200)}"))
        if len(events) > EVENTS_SHOWN:
            console.print(Text(f"  ... and {len(events) - EVENTS_SHOWN} more in the report",
                               style="dim"))
    elif any(fit.guarded for fit in result.fits):
        console.print(Text("firewall: no violation", style="green"))
    for note in result.notes:
        console.print(Text(f"note: {clean(note, 400)}", style="dim italic"))
    if result.logdir and any(fit.run_dir for fit in result.fits):
        console.print(Text(f"logs:        tensorboard --logdir {clean(_shown(result.logdir))}"))
    if result.report_path:
        console.print(Text(f"report:      {clean(_shown(result.report_path))}"))
    if result.html_path:
        console.print(Text(f"html:        {clean(_shown(result.html_path))}"))
    style = "green" if result.exit_code == 0 else "bold red"
    console.print(Text(f"exit status: {result.exit_code}", style=style))


__all__ = ["render_result"]
