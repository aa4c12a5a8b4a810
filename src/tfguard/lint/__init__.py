"""Static checks of a model, its loss, a batch and a `tf.data` pipeline.

Each check returns a list of `Finding` and never raises for a finding
(raising is for arguments it cannot read). They run at compile/fit time and
from the CLI (`tfguard lint MODEL.keras`).

Example:

>>> import keras
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
>>> model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
>>> [(f.id, f.code) for f in lint(model)]
[('loss_activation_mismatch', 'softmax_with_from_logits')]
"""

from tfguard.lint._dataset import lint_dataset
from tfguard.lint._dataset_graph import DatasetGraph, DatasetOp, read_dataset_graph
from tfguard.lint._describe import describe_model
from tfguard.lint._front import front_of_model
from tfguard.lint._heads import OutputHead, output_heads
from tfguard.lint._inputs import lint_inputs
from tfguard.lint._labels import lint_labels
from tfguard.lint._losses import LossInfo, resolve_loss
from tfguard.lint._model_lint import lint_model
from tfguard.lint._render import lint_from_json, lint_to_json, render_lint
from tfguard.lint._runner import lint, lint_saved_model
from tfguard.lint._symptom_ids import SYMPTOM_IDS

__all__ = [
    "SYMPTOM_IDS",
    "DatasetGraph",
    "DatasetOp",
    "LossInfo",
    "OutputHead",
    "describe_model",
    "front_of_model",
    "lint",
    "lint_dataset",
    "lint_from_json",
    "lint_inputs",
    "lint_labels",
    "lint_model",
    "lint_saved_model",
    "lint_to_json",
    "output_heads",
    "read_dataset_graph",
    "render_lint",
    "resolve_loss",
]
