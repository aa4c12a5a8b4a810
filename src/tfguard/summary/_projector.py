"""The embedding projector, in a form that works with Keras 3.

`tf.summary.embedding` does not exist, and the config Keras 3's TensorBoard
callback writes points at checkpoint keys its own checkpoints do not have,
so the projector shows nothing. `write_projector` writes what the projector
plugin reads without any checkpoint: the vectors as a TSV file
(`tensor_path`), the labels as a metadata TSV, and `projector_config.pbtxt`
(`tensorboard.plugins.projector.ProjectorConfig`). Several embeddings can
share a directory; writing one with an existing name replaces it.

TensorBoard lists a projector for a run directory that holds an event file
(any run `tfguard.Logger` wrote) or for the log root itself.

Example:

>>> import tempfile, numpy as np
>>> run = tempfile.mkdtemp()
>>> path = write_projector(run, np.eye(3), ["a", "b", "c"], name="digits")
>>> sorted(os.listdir(run))
['digits.tsv', 'digits_metadata.tsv', 'projector_config.pbtxt']
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorboard.plugins import projector

from tfguard._errors import ContractError
from tfguard._files import write_atomic
from tfguard.summary._rundir import sanitize_component

CONFIG_FILENAME = "projector_config.pbtxt"
MAX_POINTS = 100_000  # the projector itself samples beyond this


def _metadata_line(label) -> str:
    text = " ".join(str(label).replace("\t", " ").split())
    return text or "(empty)"


def _read_config(path: str):
    config = projector.ProjectorConfig()
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path, "r") as handle:
            text_format.Parse(handle.read(), config)
    return config


def _write_whole(path: str, text: str) -> None:
    """A local file is replaced atomically (`write_atomic`); a remote one (`gs://...`) by gfile."""
    if "://" in path:
        with tf.io.gfile.GFile(path, "w") as handle:
            handle.write(text)
    else:
        write_atomic(path, text)


def write_projector(
    logdir,
    embeddings,
    metadata: Sequence | None = None,
    *,
    name: str = "embedding",
) -> str:
    """Writes embeddings for TensorBoard's projector into `logdir`.

    Files: `<name>.tsv` (one row per point, tab-separated), with `metadata`
    also `<name>_metadata.tsv` (one label per line, no header), and
    `projector_config.pbtxt` listing every embedding written to `logdir`
    (an existing entry named `name` is replaced). Paths in the config are
    relative, so the run directory can be moved.

    Example:

    >>> import tempfile
    >>> run = tempfile.mkdtemp()
    >>> config = write_projector(run, np.random.rand(10, 4), [str(i % 2) for i in range(10)])
    >>> os.path.basename(config)
    'projector_config.pbtxt'

    Args:
        logdir: a run directory (created if missing).
        embeddings: `[n, d]` numbers (`[n, ...]` is flattened to `[n, d]`), finite.
        metadata: one label per point, or `None`. Defaults to `None`.
        name: the embedding's name in the projector (sanitized for the
            file names). Defaults to `"embedding"`.

    Returns:
        The path of `projector_config.pbtxt`.

    Raises:
        ContractError: for an empty or non-finite embedding, more than
            100000 points, or metadata of another length.
    """
    array = np.asarray(embeddings)
    if array.ndim < 2 or array.shape[0] == 0 or array.size == 0:
        raise ContractError(
            "Received an invalid value for `embeddings`, expected a non-empty array [n, d]. "
            f"Received: shape={array.shape}"
        )
    array = array.reshape(array.shape[0], -1).astype(np.float64)
    if not np.all(np.isfinite(array)):
        bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
        raise ContractError(
            f"Received an invalid value for `embeddings`, expected finite values. Received: {bad} "
            f"non-finite of {array.size} values"
        )
    if array.shape[0] > MAX_POINTS:
        raise ContractError(
            f"Received an invalid value for `embeddings`, expected at most {MAX_POINTS} points. "
            f"Received: {array.shape[0]} points"
        )
    if metadata is not None and len(metadata) != array.shape[0]:
        raise ContractError(
            "Received an invalid value for `metadata`, expected one label per embedding row "
            f"({array.shape[0]}). Received: {len(metadata)} labels"
        )
    logdir = os.fspath(logdir)
    tf.io.gfile.makedirs(logdir)
    stem = sanitize_component(name, fallback="embedding")
    tensor_file = f"{stem}.tsv"
    buffer = io.StringIO()
    np.savetxt(buffer, array, fmt="%.7g", delimiter="\t")
    _write_whole(os.path.join(logdir, tensor_file), buffer.getvalue())
    metadata_file = None
    if metadata is not None:
        metadata_file = f"{stem}_metadata.tsv"
        _write_whole(os.path.join(logdir, metadata_file),
                     "".join(_metadata_line(label) + "\n" for label in metadata))
    config_path = os.path.join(logdir, CONFIG_FILENAME)
    config = _read_config(config_path)
    kept = [e for e in config.embeddings if e.tensor_name != str(name)]
    del config.embeddings[:]
    config.embeddings.extend(kept)
    embedding = config.embeddings.add()
    embedding.tensor_name = str(name)
    embedding.tensor_path = tensor_file
    embedding.tensor_shape.extend([int(array.shape[0]), int(array.shape[1])])
    if metadata_file is not None:
        embedding.metadata_path = metadata_file
    _write_whole(config_path, text_format.MessageToString(config))
    return config_path


def check_embedding_source(model, source) -> None:
    """Checks, before training, that `source` (a layer name or a callable) can give embeddings.

    Raises:
        ContractError: for an unknown layer, or a layer name on a model
            without symbolic inputs (a subclassed model).
    """
    if callable(source):
        return
    try:
        model.get_layer(str(source))
    except ValueError as error:
        raise ContractError(
            f"Received an invalid value for `embeddings`, expected the name of a layer of "
            f"'{model.name}' or a callable. Received: {source!r}"
        ) from error
    if not getattr(model, "inputs", None):
        raise ContractError(
            f"Received an invalid value for `embeddings`: model '{model.name}' has no symbolic "
            "inputs (a subclassed model), so a layer's output cannot be extracted by name. "
            f"Received: {source!r}",
            hint="pass a callable, e.g. embeddings=(lambda x: model.encoder(x), samples, labels)",
        )


def compute_embeddings(model, source, samples) -> tuple[np.ndarray, str]:
    """The embeddings of `samples`: a layer's output (by name) or `source(samples)`.

    Returns:
        `(vectors, name)`: a numpy array and the embedding's name (the layer
        name, the callable's `__name__`, or `"embedding"` for a lambda).
    """
    import keras

    if callable(source):
        vectors = source(samples)
        name = getattr(source, "__name__", "embedding")
        name = "embedding" if name == "<lambda>" else name
    else:
        layer = model.get_layer(str(source))
        extractor = keras.Model(model.inputs, layer.output)
        vectors = extractor.predict(samples, verbose=0)
        name = layer.name
    return np.asarray(keras.ops.convert_to_numpy(vectors)), name


__all__ = ["CONFIG_FILENAME", "check_embedding_source", "compute_embeddings", "write_projector"]
