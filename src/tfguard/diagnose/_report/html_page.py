"""`write_html`: diagnoses as ONE self-contained HTML file with inline PNG plots.

The page needs nothing but itself: styles are inline, plots are PNG images
embedded as `data:` URIs (matplotlib, Agg canvas), and it has no script at
all. Every value that comes from logs or users (run names, hparams, layer
names, messages, reasons) is escaped with `html.escape`, its control
characters shown as `\\xNN`, and a Content-Security-Policy `<meta>` forbids
scripts and any external resource, so even a string that slipped through
could not run or load anything.

Per run it shows: the hyperparameters as the user gave them (integers stay
integers), the final and best metrics, the symptoms (severity, id, layer,
onset, message, evidence, suggestion), the loss and metric curves with the
onset of each finding marked, the learning rate on its own log-scale panel,
the gradient norm of every layer, the dead and saturated fractions of every
layer, the firewall's violations on a timeline beside the loss
(`html.firewall`), each finding's evidence drawn where it lives and the
weight / gradient / activation distributions of the layers the findings
name (`html.evidence`), and the rules that could not run with the reason.
A page of several runs (a sweep) starts with their comparison
(`compare.section`): one row per run and the curves overlaid. A sweep of
more than `MAX_DETAILED_RUNS` (20) runs shows only the runs that matter in
detail (`compare.select`: the best, the worst, those that failed or have
findings); the others keep their row, so 500 runs make a page of a few MB
in seconds. Given the
trials of `tfguard run --try-fixes` (`trials=`), the page opens with them
(`html.trials`): each remedy tried, its measure before → after, its
verdict (only `improved` is a fix), and the original's and the trial's
curves overlaid.

Example:

>>> import os, tempfile
>>> from tfguard.diagnose import Signals, diagnose, write_html
>>> d = diagnose(Signals.from_arrays({"train/loss": ([10, 20, 30], [1.0, 0.6, 0.4])}, run="demo"))
>>> path = write_html([d], os.path.join(tempfile.mkdtemp(), "report.html"))
>>> "data:image/png;base64," in open(path, encoding="utf-8").read()
True
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

from tfguard._errors import ContractError
from tfguard._files import write_atomic
from tfguard._findings import SYMPTOMS, fmt
from tfguard.diagnose._engine import Diagnosis
from tfguard.diagnose._report.compare.section import compare_section
from tfguard.diagnose._report.compare.select import detailed_runs
from tfguard.diagnose._report.html.evidence import distributions_section, evidence_section
from tfguard.diagnose._report.html.firewall import firewall_section
from tfguard.diagnose._report.html.parts import e as _e
from tfguard.diagnose._report.html.parts import hparam_rows, img, kv_table
from tfguard.diagnose._report.html.trials import trials_section
from tfguard.diagnose._report.plots.curves import (
    activation_png,
    grad_norm_png,
    learning_rate_png,
    loss_png,
    metrics_png,
)
from tfguard.diagnose._report.terminal import unreadable

TITLE = "tfguard report"

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:1.6em}h2{font-size:1.3em;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:2em}
h3{font-size:1.05em;margin-top:1.4em}
table{border-collapse:collapse;margin:8px 0;font-size:0.9em}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}
table.wide{table-layout:fixed;width:100%}
td,th,h2,li,p,code{overflow-wrap:anywhere;white-space:pre-wrap}
.sev{font-weight:bold;text-transform:uppercase;font-size:0.8em}
.unreadable,.error{color:#c0392b}.warning{color:#b9770e}.info{color:#2e86c1}.healthy{color:#1e8449}
.muted{color:#777}.sym{font-family:ui-monospace,monospace;font-weight:bold}
figure{margin:12px 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:0.85em;color:#555}
h4{font-size:0.95em;margin:1.2em 0 0.3em}
.finding{border-left:3px solid #ddd;padding-left:10px;margin:10px 0}
.swatch{display:inline-block;width:0.9em;height:0.9em;margin-right:6px;vertical-align:middle;border-radius:2px}
.action.skipped{color:#c0392b}.action.warned{color:#b9770e}.action.raised{color:#7b241c;font-weight:bold}
section.compare,section.trials{border-bottom:2px solid #ccc;padding-bottom:1em}
.verdict{font-weight:bold}.verdict.improved,.fix{color:#1e8449}.verdict.worse{color:#c0392b}
.verdict.no-better,.verdict.not-applied{color:#777}
.fix{font-weight:bold;text-transform:uppercase;font-size:0.8em}
.multiples{display:flex;flex-wrap:wrap;gap:10px}.multiples figure{margin:0;flex:0 0 auto;max-width:32%}
"""


def _state(d: Diagnosis) -> str:
    if unreadable(d):
        return "unreadable"
    state = d.status.get("state", "completed")
    if state == "little_evidence":
        return d.worst or "warning"
    if state != "completed":
        return "error"
    return d.worst or "healthy"


def _number(value) -> str:
    """Evidence as text: integers (also those stored as floats) without `.0`, other numbers short."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) or (math.isfinite(value) and value.is_integer() and abs(value) < 2**53):
        return str(int(value))
    return fmt(value)


def _findings(d: Diagnosis) -> str:
    if not d.findings:
        return '<p class="healthy">No symptom found.</p>'
    rows = []
    for f in d.findings:
        evidence = ", ".join(f"{k}={_number(v)}" for k, v in f.evidence.items())
        rows.append(
            f'<tr class="symptom" data-id="{_e(f.id)}"><td class="sev {_e(f.severity)}">'
            f"{_e(f.severity)}</td><td class=\"sym\" title=\"{_e(SYMPTOMS.get(f.id, ''))}\">"
            f"{_e(f.id)}</td><td>{_e(f.where or '-')}</td><td class=\"onset\">{_e(f.onset_text())}</td>"
            f"<td>{_e(f.message)}<br><span class=\"muted\">{_e(evidence)}</span></td>"
            f"<td>{_e(f.suggestion)}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("severity", "symptom", "where", "onset",
                                             "what was seen", "what to try"))
    cols = "".join(f'<col style="width:{w}%">' for w in (9, 15, 12, 10, 30, 24))
    return (f'<table class="findings wide"><colgroup>{cols}</colgroup><tr>{head}</tr>'
            f"{''.join(rows)}</table>")


def _metrics(d: Diagnosis) -> str:
    rows = []
    for tag, m in d.metrics.items():
        best = "-" if m["best"] is None else fmt(m["best"])
        at = "" if m["best_epoch"] is None else f" (epoch {m['best_epoch']})"
        rows.append((tag, f"final {fmt(m['final'])}, best {best}{at}"))
    return kv_table(rows, ("metric", "value"))


def _run_section(index: int, d: Diagnosis) -> str:
    s = d.signals
    worst = d.worst
    status = ('<span class="healthy">healthy</span>' if worst is None else
              f'<span class="{_e(worst)}">' + _e(", ".join(d.ids)) + "</span>")
    state = d.status.get("state", "completed")
    if state != "completed":
        css = "warning" if state == "little_evidence" else "error"
        status = (f'<span class="{css}">{_e(d.status.get("text", ""))}</span>'
                  + ("" if worst is None else f" — {status}"))
    if unreadable(d):
        status = '<span class="error">unreadable: its event files are damaged (see the notes)</span>'
    parts = [f'<section class="run" id="run-{index}">',
             f'<h2 class="run-name">{_e(d.run)}</h2>',
             f'<p>source: {_e(d.source)} &middot; {status}</p>',
             "<h3>Symptoms</h3>", _findings(d),
             "<h3>Hyperparameters</h3>",
             kv_table(hparam_rows(d), ("hparam", "value"), "hparams"),
             "<h3>Metrics</h3>", _metrics(d)]
    if s is not None:
        figures = [
            img(loss_png(s, d.findings), f"loss curves of run {d.run}",
                "Loss; dashed lines mark the onset of each symptom."),
            img(metrics_png(s), f"metric curves of run {d.run}", "Epoch metrics, train and validation."),
            img(learning_rate_png(s), f"learning rate of run {d.run}",
                "Learning rate of each optimizer, on its own log-scale axis."),
            img(grad_norm_png(s, d.findings), f"gradient norms of run {d.run}",
                "Gradient norm of every layer (log scale)."),
            img(activation_png(s, d.findings), f"activation statistics of run {d.run}",
                "Fraction of dead (ReLU) and saturated (sigmoid/tanh) units per layer."),
        ]
        figures = [f for f in figures if f]
        if figures:
            parts += ["<h3>Curves</h3>", *figures]
        parts += [firewall_section(d), evidence_section(d), distributions_section(d)]
    if d.rules_skipped:
        items = "".join(f"<li><span class=\"sym\">{_e(r['id'])}</span>: {_e(r['reason'])}</li>"
                        for r in d.rules_skipped)
        parts += ["<h3>Rules not run</h3>", f'<ul class="skipped">{items}</ul>']
    if d.notes:
        parts += ["<h3>Notes</h3>", "<ul>" + "".join(f"<li>{_e(n)}</li>" for n in d.notes) + "</ul>"]
    parts.append("</section>")
    return "\n".join(p for p in parts if p)


def _run_link(index: int, d: Diagnosis, shown: bool) -> str:
    """The run's name: a link to its section, or, past the cap, its log folder to report on."""
    if shown:
        return f'<a href="#run-{index}">{_e(d.run)}</a>'
    folder = getattr(d.signals, "path", None)
    if not folder:
        return f'{_e(d.run)} <span class="muted">(summary only)</span>'
    return (f'{_e(d.run)} <span class="muted">(summary only; its page: <code>tfguard report '
            f'{_e(folder)}</code>)</span>')


def render_html(diagnoses: Iterable[Diagnosis], *, title: str = TITLE,
                trials: Iterable | None = None) -> str:
    """The HTML page of the diagnoses, as a string.

    Args:
        diagnoses: the runs' diagnoses.
        title: the page title. Defaults to `"tfguard report"`.
        trials: the trials of `--try-fixes` / `try_fixes` (`Trial`s or the
            JSON report's `trials` dicts), shown first. Defaults to `None`
            (no such section).

    Returns:
        A complete, self-contained HTML document.
    """
    diagnoses = list(diagnoses)
    shown = detailed_runs(diagnoses)
    index_rows = "".join(
        f"<tr><td>{_run_link(i, d, i in shown)}</td>"
        f'<td class="{_e(_state(d))}">{_e(_state(d))}</td>'
        f"<td>{_e(', '.join(d.ids) or '-')}</td></tr>"
        for i, d in enumerate(diagnoses)
    )
    index = ('<table class="index wide"><colgroup><col style="width:50%"><col style="width:10%">'
             '<col style="width:40%"></colgroup><tr><th>run</th><th>worst</th><th>symptoms</th></tr>'
             f"{index_rows}</table>" if diagnoses else
             "" if trials is not None else "<p>No runs found.</p>")
    body = "\n".join(_run_section(i, d) for i, d in enumerate(diagnoses) if i in shown)
    compare = compare_section(diagnoses, {d.run: i for i, d in enumerate(diagnoses) if i in shown})
    compare = "\n".join(p for p in (trials_section(trials), compare) if p)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{_e(title)}</h1><p class=\"muted\">{len(diagnoses)} run(s)</p>{index}\n{compare}\n{body}\n"
        "</body></html>\n"
    )


def write_html(diagnoses: Iterable[Diagnosis], path: str | os.PathLike, *,
               title: str = TITLE, trials: Iterable | None = None) -> str:
    """Writes the diagnoses as one self-contained HTML file.

    Args:
        diagnoses: the runs' diagnoses.
        path: the file to write (its folder is created).
        title: the page title. Defaults to `"tfguard report"`.
        trials: the trials of `--try-fixes` / `try_fixes`, shown first
            (`render_html`). Defaults to `None`.

    Returns:
        The path written, as a string.

    Raises:
        ContractError: if `path` is a directory, or the file cannot be
            written (the reason from the system is in the message).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ContractError(
            f"Cannot write the HTML report to {path!r}: it is a directory. Expected the path "
            f"of a file to create, e.g. {os.path.join(path, 'report.html')!r}.",
            hint="name the file: -o DIR/report.html")
    page = render_html(diagnoses, title=title, trials=trials)
    try:
        write_atomic(path, page)
    except OSError as err:
        raise ContractError(
            f"Cannot write the HTML report to {path!r}: {err.strerror or err}. Expected a file "
            f"path in a folder you can write to.",
            hint="choose another path with -o, or fix the folder's permissions") from None
    return path
