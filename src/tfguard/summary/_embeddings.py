"""Every `Embedding` table of a model, for the projector, with its vocabulary when the model has one.

What `keras.callbacks.TensorBoard(embeddings_freq=1)` promises and Keras 3
does not deliver (keras-team/keras#20210: its projector config points at
checkpoint keys its checkpoints do not have). `embedding_tables(model)`
finds each `Embedding` layer (nested models included), reads its table, and
labels each row with the vocabulary of the `StringLookup`, `IntegerLookup` or
`TextVectorization` layer that feeds it (row i is token i; rows past the
vocabulary are labelled by their index). `embeddings_metadata` (Keras's
argument: a file per layer name, or one file for all) overrides the labels
with the lines of the file.

Example:

>>> import keras
>>> words = keras.Input((3,), dtype="string")
>>> ids = keras.layers.StringLookup(vocabulary=["cat", "dog"], name="vocab")(words)
>>> vectors = keras.layers.Embedding(4, 2, name="words")(ids)
>>> model = keras.Model(words, vectors)
>>> (table,) = embedding_tables(model)
>>> table.name, table.vectors.shape, table.labels
('words', (4, 2), ['[UNK]', 'cat', 'dog', '3'])
"""

from __future__ import annotations

import dataclasses
import os

import keras
import numpy as np

from tfguard._hooks import keras_compat

VOCABULARY_LAYERS = ("StringLookup", "IntegerLookup", "TextVectorization")


@dataclasses.dataclass
class Table:
    """One embedding table: the layer's name, its rows, and a label per row."""

    name: str
    vectors: np.ndarray
    labels: list


def _vocabulary_feeding(model: keras.Model, embedding) -> list | None:
    """The vocabulary of the lookup layer whose output is the embedding's input, if any."""
    try:
        source = embedding.input
    except (AttributeError, ValueError):
        source = None
    layers = keras_compat.nested_layers(model)
    if source is not None:
        for layer in layers:
            if type(layer).__name__ not in VOCABULARY_LAYERS:
                continue
            try:
                outputs = keras.tree.flatten(layer.output)
            except (AttributeError, ValueError):
                continue
            if any(o is source for o in outputs):
                return [str(v) for v in layer.get_vocabulary()]
    # a Sequential model or a subclassed one: the lookup layer just before the embedding
    index = next((i for i, layer in enumerate(layers) if layer is embedding), None)
    if index:
        before = layers[index - 1]
        if type(before).__name__ in VOCABULARY_LAYERS:
            return [str(v) for v in before.get_vocabulary()]
    return None


def _metadata_for(name: str, metadata) -> list | None:
    path = metadata.get(name) if isinstance(metadata, dict) else metadata
    if not path or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as handle:
        return [line.rstrip("\n") for line in handle]


def embedding_tables(model: keras.Model, metadata=None) -> list[Table]:
    """Every built `Embedding` layer's table with a label per row.

    Args:
        model: the model.
        metadata: Keras's `embeddings_metadata`: a dict layer name -> file
            of labels (one per line), or one file for every table. Defaults
            to `None` (the vocabularies the model holds).

    Returns:
        One `Table` per built `Embedding` layer.
    """
    tables = []
    for layer in keras_compat.nested_layers(model):
        if not isinstance(layer, keras.layers.Embedding) or not layer.built:
            continue
        vectors = np.asarray(keras.ops.convert_to_numpy(layer.embeddings), dtype=np.float32)
        labels = _metadata_for(layer.name, metadata) or _vocabulary_feeding(model, layer) or []
        labels = [str(v) for v in labels[: len(vectors)]]
        labels += [str(i) for i in range(len(labels), len(vectors))]
        tables.append(Table(layer.name, vectors, labels))
    return tables


__all__ = ["VOCABULARY_LAYERS", "Table", "embedding_tables"]
