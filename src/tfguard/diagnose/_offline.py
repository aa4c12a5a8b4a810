"""`diagnose_logdir`: read a log directory and diagnose every run in it.

Reads the runs with `tfguard.diagnose._inputs.logdir.iter_signals` (the
event files, normalized from tfguard's layout or the stock Keras
callback's; damage kept as notes of its run), one family of run folders at
a time, and runs the rules on each before reading the next. Pass a list as
`damage` to get the `tfguard.events.Damage` records themselves (the CLI's
exit status). With `keep_signals=False` a diagnosis does not keep its
run's values, so memory holds one run's values at a time however many runs
the logdir has (`tfguard diagnose`, `tfguard compare`).

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

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping

from tfguard.diagnose._engine import Diagnosis, diagnose
from tfguard.diagnose._inputs.logdir import iter_signals, load_signals
from tfguard.diagnose._rules import Rule
from tfguard.diagnose._thresholds import Thresholds


def diagnose_logdir(
    logdir: str | os.PathLike,
    *,
    rules: Iterable[str | Rule] | None = None,
    thresholds: Thresholds | Mapping | None = None,
    lint: list | Mapping | None = None,
    reader: Callable | None = None,
    damage: list | None = None,
    keep_signals: bool = True,
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
        reader: a function like `tfguard.events.read_logdir`, called once for
            the whole logdir. Defaults to `None` (one family at a time).
        damage: a list that receives every `tfguard.events.Damage` found
            in the files. Defaults to `None`.
        keep_signals: keep each run's `Signals` in its `Diagnosis.signals`
            (the HTML report draws them). With `False`, only a run listed
            for its damage alone keeps its (empty) signals, the others get
            `None`. Defaults to `True`.

    Returns:
        One `Diagnosis` per run, in run-name order (damage shows in `notes`).

    Raises:
        EventFileError: if `logdir` does not exist or is not a directory.
        ContractError: for an unknown rule id or threshold name.
    """
    found = (iter_signals(logdir, lint=lint, damage=damage) if reader is None
             else load_signals(logdir, lint=lint, reader=reader, damage=damage))
    out = []
    for signals in found:
        d = diagnose(signals, rules=rules, thresholds=thresholds)
        if not keep_signals and (signals.scalars or signals.histograms or signals.texts):
            d = dataclasses.replace(d, signals=None)
        out.append(d)
        del d, signals  # before the next family is read
    return sorted(out, key=lambda d: d.run)
