"""Rules on how the input pipeline feeds training: `input_bound`, `python_in_pipeline`.

- `input_bound`: on every recorded step the host measures the time it
  waited for the step's batch against the step's wall time, from the end
  of the step before (`perf/input_wait_fraction`: Python and Keras's
  callbacks between steps count, so a tiny model's microseconds of compute
  do not make a hiccup look like most of its time). A median above
  `input_wait_max` means the model waits for data more than it computes
  (seed article 003's pitfall: TensorBoard's profiler answers it only after
  a profiling session). The finding names the stage to fix from the static
  pipeline check (`config/lint`): a `map` without `num_parallel_calls`, a
  missing `prefetch`, a stage that calls Python, no `cache()`. When the
  run's threads spent more than `cpu_wait_max` of their runnable time
  waiting for a CPU (`perf/cpu_wait_fraction`: other processes held the
  CPUs) and no stage is known to be slow, the wait is the busy machine's,
  which no pipeline change wins back: no finding.
- `python_in_pipeline`: the static check found a `tf.py_function`,
  `tf.numpy_function` or `from_generator` stage; reported with what it
  costs and the TensorFlow op that would do the same, when known.

Example:

>>> from tfguard.diagnose import Signals, Thresholds
>>> s = Signals.from_arrays({"perf/input_wait_fraction": ([11, 21, 31], [0.81, 0.78, 0.84])})
>>> f = input_bound(s, Thresholds())[0]
>>> f.id, round(f.evidence["median_input_wait_fraction"], 2)
('input_bound', 0.81)
"""

from __future__ import annotations

import numpy as np

from tfguard import _tags
from tfguard._findings import Finding, fmt
from tfguard.diagnose._inputs.signals import MissingSignals, Signals, missing
from tfguard.diagnose._thresholds import Thresholds

#: Static pipeline codes that explain waiting for data, most telling first.
_SLOW_STAGES = ("python_map", "generator_source", "sequential_map", "sequential_interleave",
                "no_prefetch", "prefetch_not_last")
_FIX = {
    "python_map": "rewrite the py_function stage with TensorFlow ops",
    "generator_source": "replace from_generator with from_tensor_slices or TFRecord files",
    "sequential_map": "pass num_parallel_calls=tf.data.AUTOTUNE to .map()",
    "sequential_interleave": "pass num_parallel_calls=tf.data.AUTOTUNE to .interleave()",
    "no_prefetch": "end the pipeline with .prefetch(tf.data.AUTOTUNE)",
    "prefetch_not_last": "move .prefetch(tf.data.AUTOTUNE) to the end of the pipeline",
}


def _lint_items(signals: Signals) -> list[dict]:
    items = []
    for item in signals.lint:
        if hasattr(item, "to_dict"):
            item = item.to_dict()
        if isinstance(item, dict):
            items.append(item)
    return items


def _code(item: dict) -> str | None:
    evidence = item.get("evidence") or {}
    return evidence.get("code") if isinstance(evidence, dict) else None


def input_bound(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports training that waits for its input pipeline (see the module docstring).

    Raises:
        MissingSignals: without `perf/input_wait_fraction`.
    """
    wait = signals.series(_tags.INPUT_WAIT_FRACTION)
    if wait is None or not len(wait):
        raise MissingSignals(missing(signals, "input wait measurements", _tags.INPUT_WAIT_FRACTION))
    values = wait.values[np.isfinite(wait.values)]
    if len(values) < thresholds.persistence:
        return []
    median = float(np.median(values))
    if median <= thresholds.input_wait_max:
        return []
    stages = [item for item in _lint_items(signals) if _code(item) in _SLOW_STAGES]
    stages.sort(key=lambda item: _SLOW_STAGES.index(_code(item)))
    busy = _cpu_wait(signals)
    if busy is not None and busy > thresholds.cpu_wait_max and not stages:
        # the threads waited for CPUs other processes held: the scheduler, not a pipeline stage,
        # kept the batch waiting, and no stage of the pipeline is known to be slow
        return []
    evidence = {"median_input_wait_fraction": median, "recorded_steps": len(values)}
    if busy is not None:
        evidence["median_cpu_wait_fraction"] = busy
    if stages:
        first = stages[0]
        where = first.get("where")
        fixes = list(dict.fromkeys(_FIX[_code(s)] for s in stages))
        cause = f"; the pipeline's slowest part is {where} ({_code(first)})"
        suggestion = "Make the pipeline keep up: " + "; ".join(fixes) + (
            ". Cache the decoded data with .cache() after the expensive steps when it fits.")
        evidence["stage_code"] = _code(first)
    else:
        where, cause = None, ""
        suggestion = ("Make the pipeline keep up: map with num_parallel_calls=tf.data.AUTOTUNE, "
                      "cache() after the expensive steps, end with prefetch(tf.data.AUTOTUNE); "
                      "tensorboard's profiler shows the slow stage.")
    onset_step, onset_epoch = wait.at(0)
    return [Finding(
        "input_bound", "warning",
        f"each recorded step spent {fmt(100 * median)}% of its time waiting for its batch "
        f"(median over {len(values)} steps){cause}.",
        where=where, onset_step=onset_step, onset_epoch=onset_epoch, evidence=evidence,
        suggestion=suggestion,
    )]


def _cpu_wait(signals: Signals) -> float | None:
    """The median share of runnable time the run's threads waited for a CPU, when logged."""
    busy = signals.series(_tags.CPU_WAIT_FRACTION)
    if busy is None:
        return None
    values = busy.values[np.isfinite(busy.values)]
    return float(np.median(values)) if len(values) else None


def python_in_pipeline(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports the stages of the input pipeline that call Python (from the static check).

    A run whose static findings hold none (a pipeline without Python, or
    arrays given to `fit`) has nothing to report.
    """
    del thresholds
    items = _lint_items(signals)
    findings = []
    for item in items:
        if item.get("id") != "python_in_pipeline":
            continue
        evidence = {k: v for k, v in (item.get("evidence") or {}).items()
                    if isinstance(v, (int, float, str)) and k != "chain"}
        findings.append(Finding(
            "python_in_pipeline", "warning", str(item.get("message", "")), where=item.get("where"),
            onset_step=0, onset_epoch=0, evidence=evidence,
            suggestion=str(item.get("suggestion", "")),
        ))
    return findings


__all__ = ["input_bound", "python_in_pipeline"]
