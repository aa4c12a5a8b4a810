"""The tried fixes of a logdir: each `report.json` of `tfguard run --try-fixes`, bounded and validated.

The tab lists the trials of every `report.json` at the top of the logdir or
one folder down. Anyone who can write into the logdir writes these files,
so each is taken as untrusted input:

- **kind**: a regular file only, opened without blocking (a FIFO named
  `report.json` is refused at once, as is a device or a folder);
- **size**: at most `MAX_REPORT_BYTES`, judged from the open file's size
  before anything is read;
- **depth**: JSON nested deeper than the parser allows is refused;
- **type**: the document must be an object; `trials` a list of objects
  whose fields have `Trial.to_dict`'s types (a text, a number, a flag);
  anything else in a field is left out of that field, a trial that is not
  an object is left out and counted; `runs` a list of objects with a `run`
  name. At most `MAX_TRIALS` trials per report and `MAX_TEXT` characters per
  text are passed on (the counts say how many there were).

A file refused for any of these is listed with `error` (one sentence: the
file and what was wrong) and no trials, so the tab says it and shows the
rest. Each file is parsed once per size and mtime (`ReportCache`).

Example:

>>> import json, os, tempfile
>>> logdir = tempfile.mkdtemp()
>>> with open(os.path.join(logdir, "report.json"), "w") as f:
...     json.dump({"runs": 5, "trials": [None, {"finding": "nonfinite", "verdict": "improved"}]}, f)
>>> [(r["runs"], r["trial_count"], r["trials"][0]["finding"], r["skipped"]) for r in ReportCache().reports(logdir)]
[([], 2, 'nonfinite', 1)]
"""

from __future__ import annotations

import json
import math
import os
import stat
import threading

__all__ = ["MAX_REPORTS", "MAX_REPORT_BYTES", "MAX_TEXT", "MAX_TRIALS", "ReportCache", "read_report"]

MAX_REPORT_BYTES = 16 << 20
"""The largest `report.json` read (16 MiB, as a quarantine's `meta.json`); larger ones are refused unread."""
MAX_TRIALS = 100
"""The most trials of one report passed to the tab."""
MAX_TEXT = 2000
"""The most characters of one text field of a trial (longer ones are cut, marked with `…`)."""
MAX_REPORTS = 100
"""The most reports listed for one logdir (its top, then its folders by name)."""

_NAME = "report.json"
_TEXTS = ("remedy", "finding", "where", "change", "measure", "verdict", "run_dir")
_NUMBERS = ("before", "after", "margin", "epochs", "seconds")
_MAX_NOTES = 20


def _text(value) -> str | None:
    if not isinstance(value, str):
        return None
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"


def _number(value) -> float | int | str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value if value in ("NaN", "Infinity", "-Infinity") else None
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return value


def _trial(doc: dict) -> dict:
    """A trial with only `Trial.to_dict`'s fields, each of its type (else `None`); no curves."""
    trial = {key: _text(doc.get(key)) for key in _TEXTS}
    trial.update({key: _number(doc.get(key)) for key in _NUMBERS})
    trial["fix"] = doc.get("fix") if isinstance(doc.get("fix"), bool) else None
    notes = doc.get("notes")
    trial["notes"] = ([t for t in map(_text, notes[:_MAX_NOTES]) if t is not None]
                      if isinstance(notes, list) else [])
    return trial


def _refused(relative: str, why: str) -> dict:
    return {"report": relative, "runs": [], "trials": [], "trial_count": 0, "skipped": 0,
            "error": f"{relative} was not read: {why}"}


def read_report(path: str, relative: str) -> dict | None:
    """One `report.json` as the tab lists it, or `None` when it holds no trials.

    Args:
        path: the file.
        relative: its name relative to the logdir, as the tab shows it.

    Returns:
        `{"report", "runs", "trials", "trial_count", "skipped", "error"}`:
        `trial_count` trials were in the file, the first `MAX_TRIALS` of those
        that are objects are in `trials`, `skipped` were not objects; `error`
        is `None` or why the file was refused (then `trials` is empty).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        return _refused(relative, f"it cannot be opened ({error.strerror or error})")
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return _refused(relative, "it is not a regular file (a FIFO, a device or a folder "
                                      "named report.json); expected the JSON file tfguard run wrote")
        if info.st_size > MAX_REPORT_BYTES:
            return _refused(relative, f"it holds {info.st_size:,} bytes, more than the "
                                      f"{MAX_REPORT_BYTES:,} a report of tfguard run --try-fixes needs")
        data = handle.read(MAX_REPORT_BYTES + 1)
    if len(data) > MAX_REPORT_BYTES:
        return _refused(relative, f"it grew past {MAX_REPORT_BYTES:,} bytes while being read")
    try:
        doc = json.loads(data)
    except RecursionError:
        return _refused(relative, "its JSON is nested deeper than the parser allows")
    except ValueError as error:
        return _refused(relative, f"it is not JSON ({str(error)[:200]})")
    if not isinstance(doc, dict):
        return _refused(relative, f"its JSON is a {type(doc).__name__}, expected an object with "
                                  "`runs` and `trials`")
    trials = doc.get("trials")
    if trials is None or trials == []:
        return None  # a report of tfguard run without --try-fixes
    if not isinstance(trials, list):
        return _refused(relative, f"its `trials` is a {type(trials).__name__}, expected a list")
    objects = [t for t in trials if isinstance(t, dict)]
    runs = doc.get("runs")
    names = [r["run"] for r in runs if isinstance(r, dict) and isinstance(r.get("run"), str)] \
        if isinstance(runs, list) else []
    return {"report": relative, "runs": [_text(n) for n in names[:MAX_TRIALS]],
            "trials": [_trial(t) for t in objects[:MAX_TRIALS]], "trial_count": len(trials),
            "skipped": len(trials) - len(objects), "error": None}


def _candidates(logdir: str) -> list[tuple[str, str]]:
    """`(path, relative)` of every `report.json` place: the logdir's top and each folder in it."""
    found = [(os.path.join(logdir, _NAME), _NAME)]
    try:
        with os.scandir(logdir) as entries:
            folders = sorted(e.name for e in entries if e.is_dir())
    except OSError:
        return found
    found += [(os.path.join(logdir, name, _NAME), f"{name}/{_NAME}") for name in folders]
    return found


class ReportCache:
    """The listed reports of a logdir, each file parsed again only when its size or mtime changed."""

    def __init__(self):
        self._lock = threading.Lock()
        self._parsed: dict[str, tuple[tuple, dict | None]] = {}

    def reports(self, logdir: str) -> list[dict]:
        """Every report with trials (or refused), in name order; at most `MAX_REPORTS`."""
        out, seen = [], {}
        with self._lock:
            for path, relative in _candidates(logdir):
                if len(out) >= MAX_REPORTS:
                    break
                try:
                    info = os.stat(path)  # never opens: a FIFO does not block here
                except OSError:
                    continue
                mark = (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino)
                hit = self._parsed.get(path)
                report = hit[1] if hit is not None and hit[0] == mark else read_report(path, relative)
                seen[path] = (mark, report)
                if report is not None:
                    out.append(report)
            self._parsed = seen
        return out
