"""The JSON report of an attached run: `tfguard.report/1` plus the script's outcome.

The document is a `tfguard.report/1` document (`tfguard.diagnose.to_json`:
one entry of `runs` per `fit()` call, named `<model name>-fit<index>`, each
with its `symptoms` of `id`, `severity`, `message`, `where`, `evidence`,
`suggestion`, `onset_step`, `onset_epoch`) with these top-level fields
added, as the schema allows within a version::

    {
      "schema": "tfguard.report/1",
      "runs": [...],                      # as tfguard.diagnose.to_json
      "script": {"path": str,             # the script as given
                 "argv": [str]} | null,   # sys.argv inside the script
      "exit_code": int | null,            # what `tfguard run` exits with
      "error": {"type": str,              # the uncaught exception, or null
                "message": str} | null,
      "logdir": str | null,               # root of the event files (null without logger)
      "fits": [{"run": str, "model": str, "index": int,   # one per fit() call, loop run, ...
                "kind": "fit" | "loop" | "outside-fit",       # a hand-written loop's run is "loop"
                "phase": int,                                 # its run's phase (one per compile)
                "guarded": bool, "run_dir": str | null,
                "error": str | null,      # "<type>: <message>" if fit raised
                "notes": [str]}],
      "guard_events": [{"run": str,       # the firewall's violations, in order
                        "step": int, "stage": "data" | "forward" | "loss" | "gradients",
                        "where": str, "action": "raised" | "skipped" | "warned",
                        "message": str, "quarantine": str | null,
                        "failed": [str], "counts": {name: number}}],
      "notes": [str]                      # remarks on the session (no logger, ...)
    }

Numbers that are not finite are written as the strings `"NaN"`,
`"Infinity"` and `"-Infinity"` (strict JSON), as in `tfguard.report/1`.

Example:

>>> import json
>>> doc = attach_report([], script="train.py", argv=["train.py"], exit_code=0)
>>> doc["schema"], doc["runs"], doc["exit_code"], doc["guard_events"]
('tfguard.report/1', [], 0, [])
>>> _ = json.dumps(doc, allow_nan=False)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence

from tfguard._files import write_atomic
from tfguard._findings import strict_json as _plain
from tfguard.diagnose import to_json


def event_to_json(run: str, event) -> dict:
    """One guard event of the report.

    Example:

    >>> from tfguard._firewall import GuardEvent
    >>> e = GuardEvent(4, "loss", "loss", "loss at step 4 has 1 NaN", {"nan": 1}, "warned")
    >>> event_to_json("mlp-fit1", e)["stage"]
    'loss'

    Args:
        run: the run the event belongs to.
        event: a `tfguard._firewall.GuardEvent`.

    Returns:
        The event's dict, as documented in this module.
    """
    return _plain({
        "run": run,
        "step": int(event.step),
        "stage": event.stage,
        "where": event.where,
        "action": event.action,
        "message": event.message,
        "quarantine": event.quarantine,
        "failed": list(event.failed),
        "counts": dict(event.counts),
    })


def attach_report(
    fits: Iterable,
    *,
    script: str | None = None,
    argv: Sequence[str] | None = None,
    exit_code: int | None = None,
    error: BaseException | None = None,
    logdir: str | None = None,
    notes: Iterable[str] = (),
) -> dict:
    """The report document of an attached run (a dict ready for `json.dump`).

    Example:

    >>> attach_report([], notes=["no fit"])["notes"]
    ['no fit']

    Args:
        fits: the session's `FitRecord`s.
        script: the script's path as given. Defaults to `None`.
        argv: `sys.argv` inside the script. Defaults to `None`.
        exit_code: the exit status. Defaults to `None`.
        error: the exception the script did not catch. Defaults to `None`.
        logdir: the root of the event files. Defaults to `None`.
        notes: remarks on the session. Defaults to `()`.

    Returns:
        The document, as documented in this module.
    """
    fits = list(fits)
    doc = to_json([f.diagnosis for f in fits if f.diagnosis is not None])
    doc["script"] = None if script is None else {"path": str(script), "argv": [str(a) for a in argv or ()]}
    doc["exit_code"] = exit_code
    doc["error"] = None if error is None else {"type": type(error).__name__, "message": str(error)}
    doc["logdir"] = logdir
    doc["fits"] = [_plain({"run": f.run, "model": f.model, "index": f.index, "kind": f.kind, "phase": f.phase,
                           "guarded": f.guarded,
                           "run_dir": f.run_dir, "error": f.error, "notes": list(f.notes)})
                   for f in fits]
    doc["guard_events"] = [event_to_json(f.run, e) for f in fits for e in f.guard_events]
    doc["notes"] = [str(n) for n in notes]
    return doc


def write_report(doc: dict, path: str | os.PathLike) -> str:
    """Writes a report document as strict, indented JSON (its folder is created).

    Example:

    >>> import tempfile, os
    >>> path = write_report(attach_report([]), os.path.join(tempfile.mkdtemp(), "r.json"))
    >>> path.endswith("r.json")
    True

    Args:
        doc: the document of `attach_report`.
        path: the file to write.

    Returns:
        The path written, as a string.

    Raises:
        OSError: if the file cannot be written.
        ValueError: if the document holds a non-finite float (it never does
            when built by `attach_report`).
    """
    path = os.fspath(path)
    return write_atomic(path, json.dumps(doc, indent=2, allow_nan=False) + "\n")


__all__ = ["attach_report", "event_to_json", "write_report"]
