"""The watch on a terminal: one line per event, the fix under each new finding.

Lines read as `tfguard diagnose` writes its findings (the same message and
suggestion), prefixed with the time, the severity and the run:

    14:02:03  error    lr_10  step 40 (epoch 3)  nonfinite: 'train/loss' became NaN at step 40, ...
              root cause: learning_rate
              fix: lower the learning rate ...

Text from logs (run names, layer names, messages) goes into rich `Text`,
never markup, with control characters escaped (`tfguard._text.printable`).

Example:

>>> import io
>>> from rich.console import Console
>>> from tfguard.diagnose import Finding
>>> from tfguard.watch._event import WatchEvent
>>> console = Console(file=io.StringIO(), width=200, highlight=False)
>>> f = Finding("nonfinite", "error", "'train/loss' became NaN at step 40.", onset_step=40,
...             suggestion="lower the learning rate")
>>> TerminalOutput(console).emit(WatchEvent("finding", "lr_10", f.message, "error", 40, None, f))
>>> print(console.file.getvalue().split("  ", 1)[1].rstrip())
error    lr_10  step 40  nonfinite: 'train/loss' became NaN at step 40.
          fix: lower the learning rate
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.text import Text

from tfguard._findings_table import SEVERITY_STYLES
from tfguard._text import clean
from tfguard.watch._event import WatchEvent

__all__ = ["TerminalOutput"]

_INDENT = " " * 10


def _where(event: WatchEvent) -> str:
    parts = []
    if event.step is not None:
        parts.append(f"step {event.step}")
    if event.epoch is not None:
        parts.append(f"epoch {event.epoch}")
    if len(parts) == 2:
        return f"{parts[0]} ({parts[1]})"
    return parts[0] if parts else ""


class TerminalOutput:
    """Prints the watch's events on a rich console.

    Args:
        console: where to print.
        clock: gives the time shown on each line. Defaults to `time.localtime`.
    """

    def __init__(self, console: Console, *, clock=time.localtime):
        self.console = console
        self.clock = clock

    def start(self, logdir: str, interval: float | None) -> None:
        """Says what is watched: every `interval` seconds, or once (`None`)."""
        if interval is None:
            self.console.print(Text(f"looking once at {clean(logdir)}", style="dim"))
            return
        self.console.print(Text(f"watching {clean(logdir)} every {interval:g} s "
                                "(Ctrl-C stops it)", style="dim"))

    def notice(self, text: str) -> None:
        """A remark of the watch itself (waiting for the logdir, a failing webhook)."""
        self.console.print(Text(time.strftime("%H:%M:%S", self.clock()) + "  " + clean(text, 500),
                                style="dim"))

    def emit(self, event: WatchEvent) -> None:
        """Prints one event (a new finding with its root cause and fix)."""
        line = Text(time.strftime("%H:%M:%S", self.clock(event.time or None)) + "  ")
        label = {"finding": event.severity, "changed": event.severity, "ended": event.severity,
                 "resolved": "resolved", "damage": "damage", "run": "run",
                 "removed": "removed"}[event.kind]
        line.append(f"{label:<8} ", style=SEVERITY_STYLES.get(label, "green" if label == "resolved" else
                                                     "yellow" if label == "damage" else "dim"))
        line.append(clean(event.run, 120), style="bold magenta")
        where = _where(event)
        if where:
            line.append(f"  {where}")
        f = event.finding
        if event.kind in ("finding", "changed") and f is not None:
            layer = f" at {clean(f.where, 80)}" if f.where else ""
            changed = " (changed)" if event.kind == "changed" else ""
            line.append(f"  {f.id}{layer}{changed}: ", style="bold")
            line.append(clean(event.text, 1000))
            self.console.print(line)
            if f.cause:
                cause = f.cause[0] + (f" at {f.cause[1]}" if len(f.cause) > 1 and f.cause[1] else "")
                self.console.print(Text(f"{_INDENT}root cause: {clean(cause, 200)}", style="dim"))
            if f.suggestion:
                self.console.print(Text(f"{_INDENT}fix: {clean(f.suggestion, 1000)}", style="green"))
            return
        line.append("  " + clean(event.text, 1000), style="dim" if event.kind in ("run", "removed") else "")
        self.console.print(line)

    def finish(self, result) -> None:
        """Prints the one-line summary."""
        self.console.print(Text(result.summary(), style="bold"))
