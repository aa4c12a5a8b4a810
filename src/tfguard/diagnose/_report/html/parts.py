"""The pieces every section of the HTML report is built from: escaped text, figures, tables, values.

Every value that comes from logs or users goes through `e`: `html.escape`
with quotes, its control characters shown as `\\xNN` (`tfguard._text.printable`),
so a name holding `<script>` or a carriage return reads literally and runs
nothing. Figures are PNG bytes inlined as `data:` URIs (`img`).

Hyperparameters keep the type the user gave them (`hparam_text`):
TensorBoard's hparams plugin stores every number as a double, so a
`batch_size` of 64 comes back as `64.0`; the report shows `64`, and a
learning rate stored as float32 (`0.0010000000474974513`) as `0.001`. The
run's own markdown table (`config/hparams`) is the literal text when it has
the name.

Example:

>>> e("<b>x</b>\\r"), hparam_text(64.0), hparam_text(0.0010000000474974513), hparam_text(True)
('&lt;b&gt;x&lt;/b&gt;\\\\x0d', '64', '0.001', 'True')
"""

from __future__ import annotations

import base64
import html

import numpy as np

from tfguard._text import printable
from tfguard.diagnose._inputs.normalize import hparams_table


def e(value) -> str:
    """Escapes any value for HTML text or attribute context, control characters shown as `\\xNN`."""
    return html.escape(printable(value), quote=True)


def img(png: bytes | None, alt: str, caption: str, css: str = "") -> str:
    """A `<figure>` with the PNG inlined as a `data:` URI, or `""` without one."""
    if not png:
        return ""
    data = base64.b64encode(png).decode("ascii")
    klass = f' class="{e(css)}"' if css else ""
    return (f'<figure{klass}><img src="data:image/png;base64,{data}" alt="{e(alt)}">'
            f"<figcaption>{e(caption)}</figcaption></figure>")


def kv_table(rows: list[tuple[str, str]], head: tuple[str, str], css: str = "") -> str:
    """A two-column table of already formatted text (escaped here), or a muted "none logged"."""
    if not rows:
        return '<p class="muted">none logged</p>'
    body = "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in rows)
    return (f'<table class="wide {e(css)}"><colgroup><col style="width:35%"><col style="width:65%">'
            f"</colgroup><tr><th>{e(head[0])}</th><th>{e(head[1])}</th></tr>{body}</table>")


def table(head: list[str], rows: list[list[str]], css: str = "", widths: list[int] | None = None) -> str:
    """A table whose cells are already HTML (escape them with `e`); `head` is plain text."""
    cols = "".join(f'<col style="width:{w}%">' for w in widths) if widths else ""
    colgroup = f"<colgroup>{cols}</colgroup>" if cols else ""
    header = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="wide {e(css)}">{colgroup}<tr>{header}</tr>{body}</table>'


def _float_text(value: float) -> str:
    if not np.isfinite(value):
        return str(value)
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    text = repr(value)
    short = f"{value:.7g}"
    if len(short) < len(text) and float(np.float32(value)) == value:  # a float32 shown as a double
        return short
    return text


def hparam_text(value, literal: str | None = None) -> str:
    """One hyperparameter as a person wrote it: integers without `.0`, float32 noise removed.

    Args:
        value: the value read back (from the hparams plugin: numbers are doubles).
        literal: the run's own text for it (`config/hparams`), if any.
            Defaults to `None`.

    Returns:
        The text to show.
    """
    if literal is not None:
        try:
            number = float(literal)
        except ValueError:
            return literal
        if len(literal) > 12 and np.isfinite(number) and not number.is_integer():
            return _float_text(number)
        return literal
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return _float_text(float(value))
    return str(value)


def logged_table(signals) -> dict[str, str]:
    """The run's own hyperparameter table (`config/hparams` markdown), name -> literal text."""
    return hparams_table(getattr(signals, "texts", None) or {})


def hparam_rows(d) -> list[tuple[str, str]]:
    """The hyperparameters of a diagnosis, then the rest of its logged configuration, as text."""
    logged = logged_table(d.signals)
    rows = [(str(k), hparam_text(v, logged.get(str(k)))) for k, v in d.hparams.items()]
    seen = {k for k, _ in rows}
    rows += [(k, hparam_text(None, v)) for k, v in logged.items() if k not in seen]
    return rows
