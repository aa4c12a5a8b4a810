"""`to_json`: diagnoses as a versioned, documented JSON document.

Schema `tfguard.report/1` (a new field may be added within a version; a
field is never renamed or removed without bumping the version)::

    {
      "schema": "tfguard.report/1",
      "runs": [
        {
          "run": str,                      # the run's name
          "source": "tfguard" | "keras" | "live" | "memory",
          "status": {"state": "completed" | "failed" | "out_of_memory" | "aborted" | "no_evidence"
                              | "little_evidence",  # most rules could not look: never healthy
                     "text": str,           # one sentence, e.g. "training failed at step 3 with ..."
                     "missing": [str],      # little_evidence: what the rules lacked
                     "type": str, "error": str, "step": int | null, "detail": {...}},  # on failure
          "healthy": bool,                 # completed, and no warning or error found
          "hparams": {name: str | number | bool},
          "metrics": {                     # per epoch-level tag
            "train/loss": {"final": number, "best": number | null,
                           "best_epoch": int | null, "best_step": int | null,
                           "mode": "min" | "max"}, ...
          },
          "symptoms": [
            {"id": str,                    # a symptom id (tfguard.diagnose.SYMPTOMS)
             "severity": "info" | "warning" | "error",
             "message": str,
             "where": str | null,          # layer or variable
             "evidence": {name: number},
             "suggestion": str,
             "onset_step": int | null,
             "onset_epoch": int | null,
             "cause": [id, where] | null}, ...  # the finding listed earlier that explains it
          ],                               # root causes first (data, configuration), then
                                           # the symptoms, worst first, then by onset
          "rules_run": [str],
          "rules_skipped": [{"id": str, "reason": str}],
          "notes": [str],
          "phases": [{"phase": int,        # a model compiled again between its fits: one per compile
                      "first_step": int,   # the run's step of its first update
                      "optimizer": str, "learning_rate": number | null,
                      "trainable_variables": int, "trainable_parameters": int}, ...]
                                           # [] for a run of one phase
        }, ...
      ]
    }

Numbers that are not finite are written as the strings `"NaN"`,
`"Infinity"` and `"-Infinity"`, so the document is strict JSON
(`json.dumps(..., allow_nan=False)` succeeds).

Example:

>>> import json
>>> from tfguard.diagnose import Signals, diagnose, to_json
>>> doc = to_json([diagnose(Signals.from_arrays({"train/loss": (None, [1.0, float("nan")])}))])
>>> doc["schema"], doc["runs"][0]["symptoms"][0]["id"]
('tfguard.report/1', 'nonfinite')
>>> _ = json.dumps(doc, allow_nan=False)
"""

from __future__ import annotations

from collections.abc import Iterable

from tfguard._findings import strict_json
from tfguard.diagnose._engine import Diagnosis

SCHEMA = "tfguard.report/1"


def run_to_json(diagnosis: Diagnosis) -> dict:
    """One run of the `tfguard.report/1` document.

    Args:
        diagnosis: the run's `Diagnosis`.

    Returns:
        The run's dict, as documented in this module.
    """
    return strict_json({
        "run": diagnosis.run,
        "source": diagnosis.source,
        "status": dict(diagnosis.status),
        "healthy": diagnosis.healthy,
        "hparams": dict(diagnosis.hparams),
        "metrics": dict(diagnosis.metrics),
        "symptoms": [f.to_dict() for f in diagnosis.findings],
        "rules_run": list(diagnosis.rules_run),
        "rules_skipped": [dict(s) for s in diagnosis.rules_skipped],
        "notes": list(diagnosis.notes),
        "phases": [dict(p) for p in diagnosis.phases],
    })


def to_json(diagnoses: Iterable[Diagnosis]) -> dict:
    """Diagnoses as one `tfguard.report/1` document (a dict ready for `json.dump`).

    Args:
        diagnoses: the runs' diagnoses.

    Returns:
        `{"schema": "tfguard.report/1", "runs": [...]}`.
    """
    return {"schema": SCHEMA, "runs": [run_to_json(d) for d in diagnoses]}
