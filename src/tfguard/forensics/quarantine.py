"""Quarantine: the bad batch, the step and the weights in use, saved without pickle.

A quarantine folder holds `batch.npz` (x, y, sample weights), `weights.npz`
(every model variable, by index; names in the metadata), `meta.json` (step,
checkpoint, where, counts, message, structure of the batch, versions) and,
when Keras can save the model, `model.keras`. Everything loads with
`allow_pickle=False` and Keras `safe_mode=True`.

Example (the guard saves a batch holding a NaN; it loads back as it was):

>>> import keras, numpy as np, tempfile, tfguard
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> model = tfguard.guard(model, policy="skip", quarantine_dir=tempfile.mkdtemp())
>>> x = np.ones((4, 3), "float32"); x[2, 1] = np.nan
>>> _ = model.fit(x, np.ones((4, 1)), batch_size=4, verbose=0)
>>> q = load_quarantine(tfguard.guard_events(model)[0].quarantine)
>>> q.x.shape, int(np.isnan(q.x).sum()), q.meta["step"], q.meta["checkpoint"]
((4, 3), 1, 0, 'data')
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import re

import keras
import numpy as np
import tensorflow as tf

from tfguard.errors import QuarantineError

ROLES = ("x", "y", "sample_weight")
SEPARATOR = "::"


def _local_numpy(value, strategy) -> np.ndarray:
    if isinstance(value, tf.distribute.DistributedValues):
        parts = [np.asarray(v) for v in strategy.experimental_local_results(value)]
        return np.concatenate(parts, axis=0) if parts and parts[0].ndim else np.stack(parts)
    if hasattr(value, "numpy"):
        return value.numpy()
    return np.asarray(value)


def _structure(value) -> dict:
    if value is None:
        return {"kind": "none"}
    if isinstance(value, dict):
        return {"kind": "dict", "keys": [str(k) for k in value]}
    if isinstance(value, (list, tuple)):
        return {"kind": "tuple" if isinstance(value, tuple) else "list", "length": len(value)}
    return {"kind": "tensor"}


def _leaves(value) -> list[tuple[str, object]]:
    if value is None:
        return []
    if isinstance(value, dict):
        return [(str(k), v) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(value)]
    return [("", value)]


def _safe_component(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "model"
    return cleaned[:80]


def _unique_dir(root: str, name: str) -> str:
    path = os.path.join(root, name)
    suffix = 1
    while os.path.exists(path):
        suffix += 1
        path = os.path.join(root, f"{name}-{suffix}")
    os.makedirs(path)
    return path


def save_quarantine(root: str, model: keras.Model, data, event, strategy=None) -> str:
    """Saves a bad batch with the step and the weights in use; returns the folder.

    Args:
        root: the quarantine root; the batch goes to `root/<model>/step-<N>`.
        model: the model whose weights were used for the batch.
        data: the batch as Keras received it (`x`, `(x, y)` or `(x, y, sw)`).
        event: the `GuardEvent` (step, checkpoint, where, message, counts).
        strategy: the distribution strategy, to gather per-replica values.
            Defaults to `None`.

    Returns:
        The path of the new quarantine folder.
    """
    from keras.src.trainers.data_adapters import data_adapter_utils

    strategy = strategy or tf.distribute.get_strategy()
    x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
    folder = _unique_dir(
        os.path.join(root, _safe_component(model.name)), f"step-{int(event.step):08d}"
    )
    arrays, structure = {}, {}
    for role, value in zip(ROLES, (x, y, sample_weight)):
        structure[role] = _structure(value)
        for key, leaf in _leaves(value):
            if leaf is not None:
                arrays[f"{role}{SEPARATOR}{key}"] = _local_numpy(leaf, strategy)
    np.savez(os.path.join(folder, "batch.npz"), **arrays)
    variables = list(model.weights)
    np.savez(
        os.path.join(folder, "weights.npz"),
        **{f"w{i:05d}": np.asarray(v.numpy()) for i, v in enumerate(variables)},
    )
    model_file, model_error = None, None
    try:
        model.save(os.path.join(folder, "model.keras"))
        model_file = "model.keras"
    except Exception as error:  # a model Keras cannot serialize still gets its batch saved
        model_error = f"{type(error).__name__}: {error}"
    meta = {
        "format": "tfguard.quarantine/1",
        "step": int(event.step),
        "checkpoint": event.checkpoint,
        "where": event.where,
        "message": event.message,
        "counts": {k: float(v) for k, v in event.counts.items()},
        "failed": list(event.failed),
        "action": event.action,
        "saved_at": _dt.datetime.now().isoformat(timespec="seconds"),
        "model": {"name": model.name, "class": type(model).__name__, "file": model_file,
                  "save_error": model_error},
        "structure": structure,
        "variables": [getattr(v, "path", v.name) for v in variables],
        "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
    }
    with open(os.path.join(folder, "meta.json"), "w", encoding="utf-8") as handle:
        json.dump(meta, handle, indent=2)
    return folder


@dataclasses.dataclass
class Quarantine:
    """A loaded quarantine folder.

    Args:
        path: the folder.
        meta: the metadata (`meta.json`).
        x: inputs, rebuilt to their structure.
        y: targets or `None`.
        sample_weight: sample weights or `None`.
        weights: variable path -> array, in the model's variable order.
    """

    path: str
    meta: dict
    x: object
    y: object
    sample_weight: object
    weights: dict

    def load_model(self, custom_objects=None) -> keras.Model:
        """Loads the saved model with `safe_mode=True`.

        Raises:
            QuarantineError: when the model could not be saved with the batch.
        """
        name = self.meta["model"].get("file")
        if not name:
            raise QuarantineError(
                f"Quarantine {self.path} has no saved model "
                f"({self.meta['model'].get('save_error')}).",
                hint="pass the model: tfguard.replay(path, model=my_model)",
            )
        path = os.path.join(self.path, name)
        try:
            return keras.saving.load_model(path, custom_objects=custom_objects, safe_mode=True)
        except (ValueError, TypeError) as error:
            raise QuarantineError(
                f"The model saved in {path} cannot be loaded with safe_mode=True: {error}",
                hint="pass the model that was training: tfguard.replay(path, model=my_model), "
                "or custom_objects=... for custom layers",
            ) from error


def _rebuild(structure: dict, values: dict):
    kind = structure["kind"]
    if kind == "none":
        return None
    if kind == "tensor":
        return values[""]
    if kind == "dict":
        return {k: values[k] for k in structure["keys"]}
    items = [values[str(i)] for i in range(structure["length"])]
    return tuple(items) if kind == "tuple" else items


def load_quarantine(path: str) -> Quarantine:
    """Loads a quarantine folder without pickle.

    Example:

    >>> # q = load_quarantine("tfguard-quarantine/sequential/step-00001200")

    Raises:
        QuarantineError: for a missing folder or file, or a foreign format.
    """
    meta_path = os.path.join(path, "meta.json")
    for needed in ("meta.json", "batch.npz", "weights.npz"):
        if not os.path.isfile(os.path.join(path, needed)):
            raise QuarantineError(
                f"Received an invalid quarantine folder '{path}': '{needed}' is missing, "
                "expected meta.json, batch.npz and weights.npz.",
                hint="pass a folder printed by a GuardViolation, e.g. tfguard-quarantine/<model>/step-N",
            )
    with open(meta_path, encoding="utf-8") as handle:
        meta = json.load(handle)
    if meta.get("format") != "tfguard.quarantine/1":
        raise QuarantineError(
            f"Received an unknown quarantine format in {meta_path}: {meta.get('format')!r}, "
            "expected 'tfguard.quarantine/1'."
        )
    per_role: dict[str, dict] = {role: {} for role in ROLES}
    with np.load(os.path.join(path, "batch.npz"), allow_pickle=False) as batch:
        for key in batch.files:
            role, _, leaf = key.partition(SEPARATOR)
            per_role[role][leaf] = batch[key]
    with np.load(os.path.join(path, "weights.npz"), allow_pickle=False) as stored:
        weights = {name: stored[f"w{i:05d}"] for i, name in enumerate(meta["variables"])}
    rebuilt = {role: _rebuild(meta["structure"][role], per_role[role]) for role in ROLES}
    return Quarantine(path, meta, rebuilt["x"], rebuilt["y"], rebuilt["sample_weight"], weights)
