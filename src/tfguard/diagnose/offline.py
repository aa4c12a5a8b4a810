"""`diagnose_logdir`: read a log directory and diagnose every run in it.

Reads the runs with `tfguard.diagnose.inputs.logdir.load_signals` (the
event files, normalized from tfguard's layout or the stock Keras
callback's; damage kept as notes of its run) and runs the rules. Pass a
list as `damage` to get the `tfguard.events.Damage` records themselves (the
CLI's exit status).

Example:

>>> import tempfile
>>> import tensorflow as tf
>>> from tfguard.diagnose import diagnose_logdir
>>> logdir = tempfile.mkdtemp()
>>> with tf.summary.create_file_writer(logdir + "/lr_0.1").as_default():
...     for epoch in range(5):
...         _ = tf.summary.scalar("train/loss", 2.3, step=10 * (epoch + 1))
>>> [(d.run, d.ids) for d in diagnose_logdir(logdir)]
[('lr_0.1', ['no_learning'])]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping

from tfguard.diagnose.engine import Diagnosis, diagnose
from tfguard.diagnose.inputs.logdir import load_signals
from tfguard.diagnose.rules import Rule
from tfguard.diagnose.thresholds import Thresholds


def diagnose_logdir(
    logdir: str | os.PathLike,
    *,
    rules: Iterable[str | Rule] | None = None,
    thresholds: Thresholds | Mapping | None = None,
    lint: list | Mapping | None = None,
    reader: Callable | None = None,
    damage: list | None = None,
) -> list[Diagnosis]:
    """Diagnoses every run under a log directory.

    Example:

    >>> import tempfile
    >>> diagnose_logdir(tempfile.mkdtemp())
    []

    Args:
        logdir: the folder TensorBoard would be pointed at.
        rules: rule ids or `Rule` objects. Defaults to `None` (all rules).
        thresholds: a `Thresholds` or a mapping of overrides. Defaults to `None`.
        lint: static findings (e.g. of `tfguard.lint` on the input pipeline)
            to attach: a list for every run, or run name -> list. Defaults to `None`.
        reader: a function like `tfguard.events.read_logdir`. Defaults to `None`.
        damage: a list that receives every `tfguard.events.Damage` found
            in the files. Defaults to `None`.

    Returns:
        One `Diagnosis` per run, in run-name order (damage shows in `notes`).

    Raises:
        EventFileError: if `logdir` does not exist or is not a directory.
        ContractError: for an unknown rule id or threshold name.
    """
    return [diagnose(s, rules=rules, thresholds=thresholds)
            for s in load_signals(logdir, lint=lint, reader=reader, damage=damage)]
