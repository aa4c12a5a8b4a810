"""`render_trials`: the table of trials, for a person.

One row per trial: the finding it answers, the change made (as the line a
person would write in the script), the measure, its value before and after,
and the verdict (green `improved`, dim `no better` / `not applied`, red
`worse`). Under the table, how many trials improved the measure, the margin
the verdicts used, and each trial's notes.

Example:

>>> import io
>>> from rich.console import Console
>>> from tfguard.remedies._trial import Trial
>>> console = Console(file=io.StringIO(), width=120)
>>> render_trials([Trial("clipnorm", "exploding_gradient", "SGD(clipnorm=1.0)", "val_loss",
...                      9.1, 0.8, "improved")], console)
>>> out = console.file.getvalue()
>>> "SGD(clipnorm=1.0)" in out and "1 of 1 trial(s) improved" in out
True
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from tfguard.diagnose._report.html.trials import measure_text
from tfguard.diagnose._report.terminal import clean

STYLES = {"improved": "bold green", "no better": "dim", "not applied": "dim", "worse": "bold red"}


def render_trials(trials, console, notes=()) -> None:
    """Prints the trials as a table on a rich console.

    Args:
        trials: the `Trial`s.
        console: a rich console.
        notes: remarks on the trials as a whole. Defaults to `()`.
    """
    trials = list(trials)
    for note in notes:
        console.print(Text(f"note: {clean(note, 400)}", style="dim italic"))
    if not trials:
        console.print(Text("try-fixes: no warning or error has a remedy to try", style="yellow"))
        return
    table = Table(title="tfguard: remedies tried", title_justify="left", show_lines=False)
    for column in ("finding", "change tried", "measure", "before", "after", "verdict"):
        table.add_column(column, overflow="fold")
    for t in trials:
        where = f" ({clean(t.where, 60)})" if t.where else ""
        table.add_row(clean(t.finding, 60) + where, clean(t.change, 200), clean(t.measure, 40),
                      measure_text(t.before), measure_text(t.after),
                      Text(t.verdict, style=STYLES.get(t.verdict, "")))
    console.print(table)
    fixed = sum(t.fix for t in trials)
    margin = trials[0].margin
    console.print(Text(f"{fixed} of {len(trials)} trial(s) improved the measure by more than "
                       f"{100 * margin:g}% (lower is better); a trial that did not is no fix",
                       style="green" if fixed else "yellow"))
    for t in trials:
        for note in t.notes:
            console.print(Text(f"note: {clean(t.remedy, 60)}: {clean(note, 400)}", style="dim italic"))
        if t.run_dir:
            console.print(Text(f"logs: {clean(t.remedy, 60)}: {clean(t.run_dir, 300)}", style="dim"))


__all__ = ["STYLES", "render_trials"]
