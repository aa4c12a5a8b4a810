"""Training a reference model: `TrainConfig` in, `TrainResult` out.

`train` loads the data, builds the `tf.data` pipelines and the model, and
fits with `EarlyStopping(restore_best_weights=True)`, `ReduceLROnPlateau` and
`BackupAndRestore`: an interrupted run (an exception, Ctrl-C, a killed
process) started again with the same config resumes at the epoch after the
last completed one. The run directory is `logdir/<run name>`, where the run
name is made from the data and `config.hparams()`, so the same config always
finds its own backup. After training, the run directory holds `model.keras`
(the best weights), `dataset.json` (the input contract, for `export_run`)
and `train_config.json`.

The configuration (`TrainConfig`, `load_config`) lives in
`tfguard.reference._config`; both names stay importable from here.

Two seams let the rest of tfguard plug in without this module knowing it:
`callbacks` (e.g. the logger, live diagnosis) run after the built-in ones,
and `wrap_model` receives the compiled model and returns the model to fit
(e.g. `tfguard.guard`).

Example:

>>> from tfguard.reference import TrainConfig, train
>>> config = TrainConfig(epochs=1, max_samples=200, logdir="/tmp/tfguard-doc")
>>> result = train(config)
>>> result.epochs_run, result.run_dir.name
(1, 'digits-cnn-adam-lr0.001-bs64-aug0-s0')
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import keras
import numpy as np
from rich.table import Table

from tfguard._errors import ContractError
from tfguard._files import write_atomic
from tfguard.reference._config import TrainConfig, load_config
from tfguard.reference._data import LoadedData, load_data
from tfguard.reference._export import export_model
from tfguard.reference._input import make_augmenter, make_dataset
from tfguard.reference._models import build_model

__all__ = [
    "CONFIG_FILE",
    "DATASET_FILE",
    "MODEL_FILE",
    "TrainConfig",
    "TrainResult",
    "load_config",
    "render_train_result",
    "train",
]

MODEL_FILE = "model.keras"
DATASET_FILE = "dataset.json"
CONFIG_FILE = "train_config.json"


@dataclasses.dataclass
class TrainResult:
    """What `train` produced.

    Args:
        model: the trained plain Keras model (best weights restored), the one
            saved and exported.
        fitted: the model `fit` ran on: `wrap_model(model)`, or `model`.
        history: per-epoch metrics of this call, e.g. `{"loss": [...], "val_loss": [...]}`.
        epochs: the 0-based epoch indices this call ran (resumed runs start later).
        initial_epoch: epochs completed before this call (restored from the backup).
        stopped_early: a callback (early stopping, or one passed in) ended
            the run before `config.epochs`.
        test_metrics: loss and accuracy on the held-out test split.
        run_dir: the run directory.
        config: the config used.
        data: the loaded data (raw arrays and info).
        seconds: wall time of the fit.
        export: the `ExportResult` when `config.export_dir` was set, else `None`.
    """

    model: keras.Model
    fitted: keras.Model
    history: dict[str, list[float]]
    epochs: list[int]
    initial_epoch: int
    stopped_early: bool
    test_metrics: dict[str, float]
    run_dir: Path
    config: TrainConfig
    data: LoadedData
    seconds: float
    export: object | None = None

    @property
    def epochs_run(self) -> int:
        """Number of epochs run by this call."""
        return len(self.epochs)


class _Progress(keras.callbacks.Callback):
    """Sends one line per epoch to `progress` (the library never prints)."""

    def __init__(self, progress: Callable[[str], None], epochs: int):
        super().__init__()
        self.progress = progress
        self.epochs = epochs
        self._first = True
        self._start = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        if self._first and epoch > 0:
            self.progress(f"resuming from the backup at epoch {epoch + 1}/{self.epochs}")
        self._first = False
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        parts = [f"{k} {float(v):.4g}" for k, v in logs.items() if np.ndim(v) == 0]
        took = time.perf_counter() - self._start
        self.progress(f"epoch {epoch + 1}/{self.epochs}  " + "  ".join(parts) + f"  ({took:.1f}s)")


def _split_validation(data: LoadedData, fraction: float, seed: int):
    n = len(data.x_train)
    n_val = int(round(n * fraction))
    if fraction > 0 and n_val == 0:
        n_val = 1
    if n_val >= n:
        raise ContractError(
            f"Received val_fraction={fraction} for {n} training examples, which leaves none "
            "to train on.",
            hint="lower val_fraction or raise max_samples.",
        )
    order = np.random.default_rng(seed).permutation(n)
    val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])
    return (
        (data.x_train[train_idx], data.y_train[train_idx]),
        (data.x_train[val_idx], data.y_train[val_idx]),
    )


def train(
    config: TrainConfig,
    callbacks: Iterable[keras.callbacks.Callback] = (),
    progress: Callable[[str], None] | None = None,
    wrap_model: Callable[[keras.Model], keras.Model] | None = None,
    on_data: Callable[[LoadedData], None] | None = None,
) -> TrainResult:
    """Trains a reference model, resuming an interrupted run with the same config.

    Callbacks run in this order: `BackupAndRestore` (so an epoch is backed
    up before a later callback can stop the run), `EarlyStopping`
    (`restore_best_weights=True`), `ReduceLROnPlateau`, the progress
    reporter, then `callbacks`. Sets the global Keras seed
    (`keras.utils.set_random_seed(config.seed)`).

    Args:
        config: the run's configuration.
        callbacks: extra Keras callbacks (logger, live diagnosis...). Defaults to `()`.
        progress: called with one human-readable line per event (data
            loaded, each epoch, resumption), or `None`. Defaults to `None`.
        wrap_model: called with the compiled model; returns the model to fit
            (e.g. a guarded one), or `None`. Defaults to `None`.
        on_data: called once with the loaded data, before training (e.g.
            to pick projector samples without loading it again). Defaults
            to `None`.

    Returns:
        A `TrainResult`.

    Raises:
        DataError: the data cannot be loaded.
        ContractError: the config is invalid, or `wrap_model` returned
            something other than a `keras.Model`.
        ExportError: `config.export_dir` is set and the export failed.
    """
    config.validate()
    keras.utils.set_random_seed(config.seed)
    say = progress or (lambda line: None)
    data = load_data(config.data, limit=config.max_samples, seed=config.seed)
    if on_data is not None:
        on_data(data)
    info = data.info
    say(
        f"data {info.name}: {len(data.x_train)} train, {len(data.x_test)} test, "
        f"input {info.input_shape} {info.dtype} in {list(info.value_range)}, "
        f"{info.num_classes} classes"
    )
    (x_tr, y_tr), (x_val, y_val) = _split_validation(data, config.val_fraction, config.seed)
    augment = None
    if config.augment:
        augment = make_augmenter(info.input_shape, flip=info.hflip_safe, seed=config.seed)
    common = {"batch_size": config.batch_size, "value_range": info.value_range}
    train_ds = make_dataset(x_tr, y_tr, training=True, augment=augment, seed=config.seed, **common)
    val_ds = make_dataset(x_val, y_val, **common) if len(x_val) else None
    test_ds = make_dataset(data.x_test, data.y_test, **common)

    base = build_model(
        config.model,
        info.input_shape,
        info.num_classes,
        optimizer=config.optimizer,
        learning_rate=config.learning_rate,
    )
    model = base
    if wrap_model is not None:
        model = wrap_model(base)
        if not isinstance(model, keras.Model):
            raise ContractError(
                "Received an invalid return value from `wrap_model`, expected a keras.Model. "
                f"Received: {type(model).__name__}"
            )
        if not {id(v) for v in base.weights} <= {id(v) for v in model.weights}:
            base = model  # a different model: save and export what was trained

    run_dir = config.run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    monitor = "val_loss" if val_ds is not None else "loss"
    built_in = [
        keras.callbacks.BackupAndRestore(str(run_dir / "backup")),
        keras.callbacks.EarlyStopping(
            monitor=monitor, patience=config.patience, restore_best_weights=True
        ),
        keras.callbacks.ReduceLROnPlateau(
            monitor=monitor, factor=config.lr_factor, patience=config.lr_patience, min_lr=1e-6
        ),
    ]
    if progress is not None:
        built_in.append(_Progress(progress, config.epochs))
    start = time.perf_counter()
    history = model.fit(
        train_ds,
        validation_data=val_ds,
        epochs=config.epochs,
        callbacks=[*built_in, *callbacks],
        shuffle=False,  # the dataset shuffles itself, before batching
        verbose=0,
    )
    seconds = time.perf_counter() - start
    epochs = [int(e) for e in history.epoch]
    initial_epoch = epochs[0] if epochs else config.epochs
    test_metrics = {
        k: float(v) for k, v in model.evaluate(test_ds, verbose=0, return_dict=True).items()
    }
    stopped = bool(epochs) and epochs[-1] + 1 < config.epochs
    say(
        f"test loss {test_metrics.get('loss', float('nan')):.4f}, "
        f"accuracy {test_metrics.get('accuracy', float('nan')):.4f}"
    )
    base.save(run_dir / MODEL_FILE)
    write_atomic(run_dir / DATASET_FILE, json.dumps(info.to_dict(), indent=2) + "\n")
    write_atomic(run_dir / CONFIG_FILE, json.dumps(config.to_dict(), indent=2) + "\n")
    result = TrainResult(
        model=base,
        fitted=model,
        history={k: [float(v) for v in vs] for k, vs in history.history.items()},
        epochs=epochs,
        initial_epoch=initial_epoch,
        stopped_early=stopped,
        test_metrics=test_metrics,
        run_dir=run_dir,
        config=config,
        data=data,
        seconds=seconds,
    )
    if config.export_dir is not None:
        result.export = export_model(base, config.export_dir, info)
        say(f"exported to {config.export_dir}")
    return result


def render_train_result(result: TrainResult, console) -> None:
    """Prints a short summary of a run to a `rich.console.Console`.

    Args:
        result: what `train` returned.
        console: a `rich.console.Console`.
    """
    table = Table(title="training run", show_header=False)
    table.add_column("what")
    table.add_column("value")
    table.add_row("run dir", str(result.run_dir))
    table.add_row("data", result.data.info.spec)
    for k, v in result.config.hparams().items():
        table.add_row(k, str(v))
    table.add_row("epochs run", f"{result.epochs_run} (from epoch {result.initial_epoch + 1})")
    table.add_row("stopped early", str(result.stopped_early))
    for k, v in result.test_metrics.items():
        table.add_row(f"test {k}", f"{v:.4f}")
    table.add_row("fit time", f"{result.seconds:.1f} s")
    console.print(table)
