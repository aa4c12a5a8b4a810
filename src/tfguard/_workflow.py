"""Observed training: the firewall, the logger and live diagnosis around a reference run.

`train_observed(config)` trains a reference model (`tfguard.reference._train`)
guarded (`tfguard.guard`, policy `"skip"` by default), logged
(`tfguard.Logger`) and diagnosed live (`LiveDiagnosis`); then diagnoses the
event files offline with the same rules and writes the JSON and HTML
reports. `demo()` adds the export and the parity check: it is what
`make demo` / `tfguard demo` runs.

Example (what `tfguard demo` runs; here only the shape of its result):

>>> [f.name for f in dataclasses.fields(ObservedRun)][:3]
['train', 'logdir', 'run_dir']
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path

from tfguard._files import write_atomic
from tfguard._firewall import guard, guard_events
from tfguard.diagnose import LiveDiagnosis, diagnose_logdir, render_terminal, to_json, write_html
from tfguard.reference._demo import DemoResult, render_demo
from tfguard.reference._input import preprocess
from tfguard.reference._parity import parity
from tfguard.reference._train import TrainConfig, train
from tfguard.summary import Logger


@dataclasses.dataclass
class ObservedRun:
    """What an observed training produced.

    Args:
        train: the `TrainResult` of the reference training.
        logdir: the root of the TensorBoard logs.
        run_dir: the run directory the logger wrote.
        diagnoses: the offline diagnosis of the run's event files.
        live_findings: what the live diagnosis reported during training.
        report_json: path of the JSON report.
        report_html: path of the HTML report.
        quarantine_dir: where bad batches went (if any).
        guard_events: the firewall's violations.
    """

    train: object
    logdir: str
    run_dir: str
    diagnoses: list
    live_findings: list
    report_json: str
    report_html: str
    quarantine_dir: str
    guard_events: list

    def render(self, console) -> None:
        """The diagnosis and where everything is, for a person."""

        render_terminal(self.diagnoses, console)
        console.print(f"firewall: {len(self.guard_events)} violation(s)"
                      + (f", quarantined under {self.quarantine_dir}" if self.guard_events else ""))
        console.print(f"logs:        {self.run_dir}")
        console.print(f"report:      {self.report_html}  (JSON: {self.report_json})")
        console.print(f"look at it:  tensorboard --logdir {self.logdir}")


def train_observed(
    config,
    *,
    policy: str = "skip",
    forward: str = "output",
    progress: Callable[[str], None] | None = None,
    extra_callbacks=(),
) -> ObservedRun:
    """Trains `config` guarded, logged and diagnosed; writes the reports.

    Args:
        config: a `tfguard.reference.TrainConfig`.
        policy: the firewall policy. Defaults to `"skip"`.
        forward: the forward stage mode. Defaults to `"output"`.
        progress: receives one line per event. Defaults to `None`.
        extra_callbacks: more Keras callbacks. Defaults to `()`.

    Returns:
        An `ObservedRun`.
    """

    root = Path(config.logdir)
    logdir = root / "logs"
    quarantine = root / "quarantine"
    wrapped = {}
    logger = Logger(str(logdir), hparams=config.hparams())
    live = LiveDiagnosis(hparams=config.hparams())

    def wrap(model):
        wrapped["model"] = model
        return guard(model, policy=policy, forward=forward, quarantine_dir=str(quarantine))

    def pick_samples(data):
        logger.embeddings = _embeddings(data, wrapped)

    result = train(
        config,
        callbacks=[logger, live, *extra_callbacks],
        progress=progress,
        wrap_model=wrap,
        on_data=pick_samples,
    )
    run_dir = logger.run_path
    if progress:
        progress("diagnosing the event files")
    diagnoses = diagnose_logdir(str(logdir))
    report_json = root / "report.json"
    report_html = root / "report.html"
    write_atomic(report_json, json.dumps(to_json(diagnoses), indent=2))
    write_html(diagnoses, report_html)

    events = guard_events(wrapped["model"]) if "model" in wrapped else []
    return ObservedRun(
        train=result,
        logdir=str(logdir),
        run_dir=str(run_dir),
        diagnoses=diagnoses,
        live_findings=list(live.findings),
        report_json=str(report_json),
        report_html=str(report_html),
        quarantine_dir=str(quarantine),
        guard_events=events,
    )


def _embeddings(data, wrapped: dict, samples: int = 500):
    """The projector's input: the penultimate layer's output for held-out samples.

    Args:
        data: the loaded data (`tfguard.reference._data.LoadedData`) training uses.
        wrapped: holds the model under `"model"` once training built it.
        samples: how many test examples. Defaults to `500`.

    Returns `(callable, raw samples, labels)` for `Logger(embeddings=...)`;
    the callable runs when training ends, on the trained model.
    """
    import keras


    x, y = data.x_test[:samples], data.y_test[:samples]
    names = list(getattr(data.info, "class_names", None) or [])

    def embed(raw):
        model = wrapped["model"]
        dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
        features = keras.Model(model.inputs, dense[-2].output if len(dense) > 1 else dense[-1].output)
        return features.predict(preprocess(raw, data.info.value_range), verbose=0)

    labels = [names[int(i)] if int(i) < len(names) else str(int(i)) for i in y]
    return (embed, x, labels)


@dataclasses.dataclass
class DemoRun:
    """The demo: an observed run, its export and the parity check."""

    observed: ObservedRun
    demo: object  # tfguard.reference._demo.DemoResult

    def render(self, console) -> None:

        render_demo(self.demo, console)
        self.observed.render(console)
        console.print(f"exports:     {self.demo.export.export_dir}")


def demo(
    root: str | os.PathLike = "runs/demo",
    *,
    epochs: int = 5,
    max_samples: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> DemoRun:
    """Trains the reference CNN on scikit-learn's digits, observed; exports; checks parity.

    Args:
        root: where logs, reports, quarantine and exports go. Defaults to `"runs/demo"`.
        epochs: maximum epochs. Defaults to `5`.
        max_samples: cap on examples (tests use it). Defaults to `None`.
        progress: receives one line per event. Defaults to `None`.

    Returns:
        A `DemoRun`; `result.demo.parity.check()` raises if parity failed.
    """

    root = Path(root)
    config = TrainConfig(
        data="digits",
        model="cnn",
        epochs=epochs,
        max_samples=max_samples,
        logdir=str(root),
        export_dir=str(root / "export"),
    )
    observed = train_observed(config, progress=progress)
    data = observed.train.data
    if progress:
        progress("checking parity: Keras vs SavedModel vs TFLite")
    check = parity(observed.train.export.export_dir, data.x_test, data.y_test)
    result = DemoResult(train=observed.train, export=observed.train.export, parity=check)
    return DemoRun(observed=observed, demo=result)
