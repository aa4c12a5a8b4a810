"""Hyper-parameters for TensorBoard's HParams tab, and as a markdown table.

A run records its hyper-parameters twice. For the HParams tab: the
experiment configuration (`hparams_config`: one `HParam` per name with a
domain inferred from its value, and one `Metric` per logged `val/` and
`train/` scalar, so the final metrics are the scalars themselves), the
session start (`hp.hparams`) and, when the run ends, the session end with
its status. For people and for `tfguard.diagnose`: a markdown table
(`config/hparams`) with the hyper-parameters and the run's configuration.

TensorBoard reads one experiment configuration per log directory (the first
run that has one). Domains inferred from one run's values cover that run;
for a sweep, pass `domains` with the whole search space so every run passes
the HParams tab's filters.

Example:

>>> import tempfile
>>> path = write_hparams(tempfile.mkdtemp(), {"lr": 1e-3, "optimizer": "adam"},
...                      metrics=["val/loss", "train/loss"])
>>> print(hparams_markdown({"lr": 1e-3, "optimizer": "adam"}))
| hparam | value |
| --- | --- |
| lr | 0.001 |
| optimizer | adam |
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping

import numpy as np
from tensorboard.plugins.hparams import api as hp
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import summary as hparams_summary_v1
from tensorboard.plugins.hparams import summary_v2 as hparams_summary

from tfguard import _tags
from tfguard._errors import ContractError
from tfguard.summary._summary_values import text_value
from tfguard.summary._writers import RunWriter

STATUSES = {
    "success": api_pb2.STATUS_SUCCESS,
    "failure": api_pb2.STATUS_FAILURE,
    "aborted": api_pb2.STATUS_FAILURE,  # TensorBoard has no "aborted": SIGTERM/Ctrl-C end as failure
    "running": api_pb2.STATUS_RUNNING,
    "unknown": api_pb2.STATUS_UNKNOWN,
}


def normalize_hparams(hparams: Mapping | None) -> dict[str, bool | int | float | str]:
    """Hyper-parameters as TensorBoard accepts them: bool, int, float or str values.

    Numpy scalars become Python numbers; `None`, sequences and other objects
    become strings. Keys become strings.

    Example:

    >>> normalize_hparams({"units": np.int64(8), "layers": (64, 32), "seed": None})
    {'units': 8, 'layers': '(64, 32)', 'seed': 'None'}
    """
    out: dict[str, bool | int | float | str] = {}
    for key, value in (hparams or {}).items():
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, (bool, int, float, str)):
            value = str(value)
        out[str(key)] = value
    return out


def infer_domain(value):
    """The HParams domain one value implies.

    bools: `Discrete([False, True])`; ints: `IntInterval(v, v)`; finite
    floats: `RealInterval(v, v)`; strings: `Discrete([v])`; a non-finite
    float has no domain (`None`).

    Example:

    >>> infer_domain(True).values, infer_domain(3).min_value, infer_domain("adam").values
    ([False, True], 3, ['adam'])
    """
    if isinstance(value, bool):
        return hp.Discrete([False, True])
    if isinstance(value, int):
        return hp.IntInterval(value, value)
    if isinstance(value, float):
        return hp.RealInterval(value, value) if math.isfinite(value) else None
    return hp.Discrete([str(value)])


def _domain(name: str, given):
    if isinstance(given, hp.Domain):
        return given
    if isinstance(given, (list, tuple, set, frozenset)) and given:
        values = [v.item() if isinstance(v, np.generic) else v for v in given]
        if all(isinstance(v, bool) for v in values) or all(isinstance(v, str) for v in values):
            return hp.Discrete(sorted(set(values)))
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return hp.Discrete(sorted({float(v) for v in values}))
    raise ContractError(
        f"Received an invalid domain for hyper-parameter '{name}', expected a "
        "tensorboard.plugins.hparams.api Domain or a non-empty list of values of one type. "
        f"Received: {given!r}"
    )


def metric_infos(scalar_tags: Iterable[str]) -> list:
    """`hp.Metric`s for the `val/` and `train/` scalar tags (validation first).

    Example:

    >>> [m.as_proto().name.tag for m in metric_infos(["train/loss", "val/loss", "batch/loss"])]
    ['val/loss', 'train/loss']
    """
    chosen = sorted({t for t in scalar_tags if _tags.is_metric(t)},
                    key=lambda t: (not t.startswith(_tags.VAL), t))
    metrics = []
    for tag in chosen:
        kind = hp.Metric.VALIDATION if tag.startswith(_tags.VAL) else hp.Metric.TRAINING
        metrics.append(hp.Metric(tag, display_name=tag, dataset_type=kind))
    return metrics


def config_summary(hparams: Mapping, metrics: Iterable[str], domains: Mapping | None = None):
    """The experiment configuration (`hparams_config`) as a `Summary` proto.

    Args:
        hparams: the hyper-parameters (see `normalize_hparams`).
        metrics: scalar tags; `val/` and `train/` ones become metrics.
        domains: name -> an `hp` Domain or a list of values, overriding the
            inferred domain. Defaults to `None`.

    Returns:
        A `tensorboard.compat.proto.summary_pb2.Summary`.

    Raises:
        ContractError: for a malformed domain.
    """
    values = normalize_hparams(hparams)
    domains = dict(domains or {})
    params = []
    for name in sorted(set(values) | {str(k) for k in domains}):
        domain = _domain(name, domains[name]) if name in domains else infer_domain(values[name])
        params.append(hp.HParam(name, domain))
    return hparams_summary.hparams_config_pb(hparams=params, metrics=metric_infos(metrics))


def session_start_summary(hparams: Mapping, *, trial_id: str | None = None, start_time: float | None = None):
    """The session start (`hp.hparams`) as a `Summary` proto."""
    return hparams_summary.hparams_pb(
        normalize_hparams(hparams), trial_id=trial_id, start_time_secs=start_time
    )


def session_end_summary(status: str = "success", end_time: float | None = None):
    """The session end with its status (`success`, `failure`, `aborted`, `running`, `unknown`).

    TensorBoard knows no "aborted": an aborted run (SIGTERM, Ctrl-C) ends as failure.

    Raises:
        ContractError: for an unknown status.
    """
    if status not in STATUSES:
        raise ContractError(
            f"Received an invalid value for `status`, expected one of {sorted(STATUSES)}. Received: status={status!r}"
        )
    return hparams_summary_v1.session_end_pb(STATUSES[status], end_time_secs=end_time)


def _cell(value) -> str:
    text = str(value).replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(text.split())


def hparams_markdown(hparams: Mapping | None, config: Mapping | None = None) -> str:
    """A two-column markdown table: the hyper-parameters, then the configuration.

    Example:

    >>> print(hparams_markdown({"lr": 0.1}, {"optimizer": "SGD"}))
    | hparam | value |
    | --- | --- |
    | lr | 0.1 |
    | optimizer | SGD |

    Args:
        hparams: the hyper-parameters, in sorted order.
        config: more rows (optimizer, epochs, versions...), in given order. Defaults to `None`.

    Returns:
        The markdown text (pipes and newlines in values are escaped).
    """
    lines = ["| hparam | value |", "| --- | --- |"]
    for key in sorted(hparams or {}, key=str):
        lines.append(f"| {_cell(key)} | {_cell(hparams[key])} |")
    for key, value in (config or {}).items():
        if hparams and key in hparams:
            continue
        lines.append(f"| {_cell(key)} | {_cell(value)} |")
    return "\n".join(lines)


def write_hparams(
    logdir,
    hparams: Mapping,
    *,
    metrics: Iterable[str] = (_tags.val("loss"), _tags.train("loss")),
    domains: Mapping | None = None,
    trial_id: str | None = None,
    status: str | None = None,
) -> str:
    """Writes a run's hyper-parameters for the HParams tab, in a new event file.

    Writes the experiment configuration, the session start and, with
    `status`, the session end into `logdir` (a run directory), plus the
    `config/hparams` markdown table. `tfguard.Logger` does this by itself;
    use this for runs that do not use it.

    Example:

    >>> import tempfile
    >>> run = tempfile.mkdtemp()
    >>> write_hparams(run, {"units": 32}, status="success") == run
    True

    Args:
        logdir: the run directory (created if missing).
        hparams: name -> bool, int, float or str (others become strings).
        metrics: the scalar tags to compare runs by. Defaults to `("val/loss", "train/loss")`.
        domains: name -> domain overrides (see `config_summary`). Defaults to `None`.
        trial_id: groups sessions with the same hyper-parameters. Defaults to
            `None` (a hash of the values).
        status: also end the session with this status. Defaults to `None`.

    Returns:
        `logdir`.

    Raises:
        ContractError: for malformed domains or status.
        SummaryWriteError: if the directory cannot be written.
    """
    logdir = os.fspath(logdir)
    summaries = [config_summary(hparams, metrics, domains), session_start_summary(hparams, trial_id=trial_id)]
    if status is not None:
        summaries.append(session_end_summary(status, time.time()))
    writer = RunWriter(logdir, strict=True)
    try:
        for summary in summaries:
            writer.write_summary(0, summary)
        writer.write(0, [text_value(_tags.CONFIG_HPARAMS, hparams_markdown(hparams))])
    finally:
        writer.close()
    return logdir


__all__ = [
    "STATUSES",
    "config_summary",
    "hparams_markdown",
    "infer_domain",
    "metric_infos",
    "normalize_hparams",
    "session_end_summary",
    "session_start_summary",
    "write_hparams",
]
