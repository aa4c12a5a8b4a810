"""The end-to-end demo: train on real data, export, and prove parity.

Offline by default: scikit-learn's handwritten digits, the reference CNN, a
few epochs, then `export_model` and `parity` on the held-out split.

Example:

>>> from tfguard.reference import run_demo
>>> result = run_demo("/tmp/tfguard-demo", epochs=1, max_samples=200)   # doctest: +SKIP
>>> result.parity.ok                                                    # doctest: +SKIP
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path

import keras

from tfguard.reference._export import ExportResult, render_export
from tfguard.reference._parity import ParityResult, parity, render_parity
from tfguard.reference._train import TrainConfig, TrainResult, render_train_result, train


@dataclasses.dataclass
class DemoResult:
    """What `run_demo` produced.

    Args:
        train: the training run.
        export: the export.
        parity: Keras vs SavedModel vs TFLite on held-out samples.
    """

    train: TrainResult
    export: ExportResult
    parity: ParityResult


def run_demo(
    root: str | Path = "runs/demo",
    *,
    data: str = "digits",
    model: str = "cnn",
    epochs: int = 3,
    max_samples: int | None = None,
    callbacks: Iterable[keras.callbacks.Callback] = (),
    wrap_model: Callable[[keras.Model], keras.Model] | None = None,
    progress: Callable[[str], None] | None = None,
) -> DemoResult:
    """Trains, exports and checks parity, all under `root`.

    Args:
        root: folder of the run directory (`root/<run name>`) and the export
            (`root/export`). Defaults to `"runs/demo"`.
        data: dataset spec. Defaults to `"digits"`.
        model: `"cnn"` or `"mlp"`. Defaults to `"cnn"`.
        epochs: maximum epochs. Defaults to `3`.
        max_samples: cap on train and test examples, or `None`. Defaults to `None`.
        callbacks: extra Keras callbacks for training. Defaults to `()`.
        wrap_model: see `train`. Defaults to `None`.
        progress: receives one line per step, or `None`. Defaults to `None`.

    Returns:
        A `DemoResult`; `result.parity.check()` raises if parity failed.

    Raises:
        DataError: the data cannot be loaded.
        ExportError: the export failed.
    """
    root = Path(root)
    config = TrainConfig(
        data=data,
        model=model,
        epochs=epochs,
        max_samples=max_samples,
        logdir=str(root),
        export_dir=str(root / "export"),
    )
    result = train(config, callbacks=callbacks, progress=progress, wrap_model=wrap_model)
    data_ = result.data
    check = parity(result.export.export_dir, data_.x_test, data_.y_test)
    if progress is not None:
        progress(f"parity {'ok' if check.ok else 'FAILED'} on {check.samples} held-out samples")
    return DemoResult(train=result, export=result.export, parity=check)


def render_demo(result: DemoResult, console) -> None:
    """Prints the run, the export and the parity table to a `rich.console.Console`.

    Args:
        result: what `run_demo` returned.
        console: a `rich.console.Console`.
    """
    render_train_result(result.train, console)
    render_export(result.export, console)
    render_parity(result.parity, console)
