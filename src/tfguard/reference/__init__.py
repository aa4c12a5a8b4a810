"""Reference data loaders, models, training, export and parity.

Carries a model from raw data through `tf.data` and training to exported
artifacts (`.keras`, a SavedModel whose signature takes raw inputs and
preprocesses them in the graph, TFLite) with their `contract.json`, and
checks that all of them answer alike.

Example:

>>> from tfguard.reference import TrainConfig
>>> TrainConfig(epochs=2).epochs
2
"""

from tfguard.reference._data import DatasetInfo, LoadedData, load_data
from tfguard.reference._demo import DemoResult, render_demo, run_demo
from tfguard.reference._export import (
    ExportResult,
    export_model,
    export_run,
    load_contract,
    render_export,
)
from tfguard.reference._input import make_augmenter, make_dataset, preprocess
from tfguard.reference._models import build_model, make_optimizer
from tfguard.reference._parity import PairParity, ParityResult, parity, render_parity
from tfguard.reference._train import (
    TrainConfig,
    TrainResult,
    load_config,
    render_train_result,
    train,
)

__all__ = [
    "DatasetInfo",
    "DemoResult",
    "ExportResult",
    "LoadedData",
    "PairParity",
    "ParityResult",
    "TrainConfig",
    "TrainResult",
    "build_model",
    "export_model",
    "export_run",
    "load_config",
    "load_contract",
    "load_data",
    "make_augmenter",
    "make_dataset",
    "make_optimizer",
    "parity",
    "preprocess",
    "render_demo",
    "render_export",
    "render_parity",
    "render_train_result",
    "run_demo",
    "train",
]
