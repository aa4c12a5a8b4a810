"""Quarantine: the bad batch, the step and the weights in use, saved without pickle.

A quarantine folder `<root>/<model>/batch-<N>` holds `batch.npz` (x, y,
sample weights), `weights.npz` (every model variable, by index; names in the
metadata), `meta.json` (batch, epoch, global step, stage, where,
counts, message, structure of the batch, versions, the files that define
the model's classes), `model.keras` when Keras can save the model, and
`replay.json` when the batch was localized with the live model. `meta.json`
is written last (atomically) and declares the dtype and shape of every
array (`arrays`); a save that fails (a full disk) removes its folder.
Everything loads with `allow_pickle=False` and Keras `safe_mode=True`, and
the arrays within bounds (`tfguard._forensics.arrays`: no file inflates
beyond its size on disk, headers must match `meta.json`); a damaged,
truncated, incomplete or crafted folder gives one `QuarantineError` naming
the file, and `meta.json` cannot point outside its folder.

Example (the guard saves a batch holding a NaN; it loads back as it was):

>>> import keras, numpy as np, tempfile, tfguard
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> model = tfguard.guard(model, policy="skip", quarantine_dir=tempfile.mkdtemp())
>>> x = np.ones((4, 3), "float32"); x[2, 1] = np.nan
>>> _ = model.fit(x, np.ones((4, 1)), batch_size=4, verbose=0)
>>> q = load_quarantine(tfguard.guard_events(model)[0].quarantine)
>>> q.x.shape, int(np.isnan(q.x).sum()), q.batch, q.meta["stage"]
((4, 3), 1, 0, 'data')
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import inspect
import json
import os
import re
import shutil
import warnings

import keras
import numpy as np
import tensorflow as tf

from tfguard._errors import QuarantineError
from tfguard._files import unique_path, write_atomic
from tfguard._forensics.arrays import array_layout, read_arrays
from tfguard._hooks import keras_compat

ROLES = ("x", "y", "sample_weight")
SEPARATOR = "::"
FORMAT = "tfguard.quarantine/1"
REPLAY_FORMAT = "tfguard.replay/1"
META_FILE = "meta.json"
MODEL_FILE = "model.keras"
REPLAY_FILE = "replay.json"
ARRAY_FILES = ("batch.npz", "weights.npz")
MAX_JSON_BYTES = 16 * 1024 * 1024
"""The largest `meta.json` or `replay.json` read (a model with thousands of variables needs < 1 MB)."""


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


def save_quarantine(root: str, model: keras.Model, data, event, strategy=None) -> str:
    """Saves a bad batch with where it sat and the weights in use; returns the folder.

    Args:
        root: the quarantine root; the batch goes to `root/<model>/batch-<N>`
            (N: the batch's 0-based index among all batches the model trained on).
        model: the model whose weights were used for the batch.
        data: the batch as Keras received it (`x`, `(x, y)` or `(x, y, sw)`).
        event: the `GuardEvent` (batch, epoch, step, stage, where, message, counts).
        strategy: the distribution strategy, to gather per-replica values.
            Defaults to `None`.

    Returns:
        The path of the new quarantine folder.

    Raises:
        OSError: when the folder or a file cannot be written; the partial
            folder is removed first.
    """
    strategy = strategy or tf.distribute.get_strategy()
    batch = int(event.batch if getattr(event, "batch", None) is not None else event.step)
    folder = unique_path(os.path.join(root, _safe_component(model.name)), f"batch-{batch:08d}",
                         create=True)
    try:
        _write_folder(folder, model, data, event, batch, strategy)
    except BaseException:
        # a full disk or a killed save: no partial folder stays behind to be replayed. If it
        # cannot be removed, it has no meta.json (written last), and loading it says "incomplete".
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def _write_folder(folder: str, model: keras.Model, data, event, batch: int, strategy) -> None:
    x, y, sample_weight = keras_compat.unpack(data)
    arrays, structure = {}, {}
    for role, value in zip(ROLES, (x, y, sample_weight)):
        structure[role] = _structure(value)
        for key, leaf in _leaves(value):
            if leaf is not None:
                arrays[f"{role}{SEPARATOR}{key}"] = _local_numpy(leaf, strategy)
    np.savez(os.path.join(folder, "batch.npz"), **arrays)
    variables = list(model.weights)
    values = {f"w{i:05d}": np.asarray(v.numpy()) for i, v in enumerate(variables)}
    np.savez(os.path.join(folder, "weights.npz"), **values)
    layout = {"batch.npz": array_layout(arrays), "weights.npz": array_layout(values)}
    del values
    model_file, model_error = None, None
    try:
        with warnings.catch_warnings():  # a model with no call() is "not built"; its batch matters
            warnings.simplefilter("ignore")
            model.save(os.path.join(folder, MODEL_FILE))
        model_file = MODEL_FILE
    except OSError:
        raise
    except Exception as error:  # a model Keras cannot serialize still gets its batch saved
        model_error = f"{type(error).__name__}: {error}"
    meta = {
        "format": FORMAT,
        "batch": batch,
        "epoch": getattr(event, "epoch", None),
        "epoch_batch": getattr(event, "epoch_batch", None),
        "step": int(event.step),
        "stage": event.stage,
        "where": event.where,
        "message": event.message,
        "counts": {k: float(v) for k, v in event.counts.items()},
        "failed": list(event.failed),
        "action": event.action,
        "examples": list(getattr(event, "examples", None) or []),
        "saved_at": _dt.datetime.now().isoformat(timespec="seconds"),
        "model": {"name": model.name, "class": type(model).__name__, "file": model_file,
                  "save_error": model_error, "defined_in": defined_in(model)},
        "structure": structure,
        "variables": [getattr(v, "path", v.name) for v in variables],
        "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
        "arrays": layout,
    }
    write_atomic(os.path.join(folder, META_FILE), json.dumps(meta, indent=2))


def defined_in(model: keras.Model) -> list[str]:
    """The source files of the model's class and of its custom layers (not Keras's own).

    What `tfguard replay PATH --import FILE` needs to load a model whose
    classes live in the training script.
    """
    files: list[str] = []
    classes = [type(model)] + [type(layer) for layer in keras_compat.nested_layers(model)]
    for cls in classes:
        module = getattr(cls, "__module__", "") or ""
        if module.startswith(("keras", "tensorflow", "tf_keras")):
            continue
        try:
            source = inspect.getsourcefile(cls)
        except (TypeError, OSError):
            source = None
        label = source or module
        if label and label not in files:
            files.append(label)
    return files


def store_replay(folder: str, report, model: keras.Model) -> str:
    """Writes the replay done with the live model beside the batch (`replay.json`).

    `tfguard replay PATH` shows it when the saved model cannot be loaded back.
    """
    path = os.path.join(folder, REPLAY_FILE)
    record = {"format": REPLAY_FORMAT, "report": report.to_dict(), "model": model.name,
              "defined_in": defined_in(model)}
    return write_atomic(path, json.dumps(record, indent=2, default=str))


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

    @property
    def batch(self) -> int:
        """The batch's 0-based index among all batches the model trained on."""
        return int(self.meta.get("batch", self.meta["step"]))

    def model_path(self) -> str | None:
        """The saved model's path, confined to the folder; `None` when none was saved.

        Raises:
            QuarantineError: when `meta.json` points outside the folder.
        """
        name = self.meta["model"].get("file")
        if not name:
            return None
        folder = os.path.realpath(self.path)
        path = os.path.realpath(os.path.join(folder, str(name)))
        if os.path.dirname(path) != folder:
            raise QuarantineError(
                f"Received an invalid 'model.file' in {os.path.join(self.path, META_FILE)}: "
                f"{name!r} points outside the quarantine folder, expected a file name inside it "
                f"such as {MODEL_FILE!r}.",
                hint="the folder was edited or crafted; replay with the live model: "
                "tfguard.replay(path, model=my_model)",
            )
        return path

    def load_model(self, custom_objects=None) -> keras.Model:
        """Loads the saved model with `safe_mode=True`.

        Raises:
            QuarantineError: when the model could not be saved with the batch,
                cannot be loaded, or `meta.json` points outside the folder.
        """
        path = self.model_path()
        if path is None:
            raise QuarantineError(
                f"Quarantine {self.path} has no saved model "
                f"({self.meta['model'].get('save_error')}).",
                hint="pass the model: tfguard.replay(path, model=my_model)",
            )
        try:
            return keras.saving.load_model(path, custom_objects=custom_objects, safe_mode=True)
        except (ValueError, TypeError, KeyError, OSError) as error:
            defined = [str(d) for d in self.meta["model"].get("defined_in") or []]
            where = f" (its classes are defined in {', '.join(defined)})" if defined else ""
            raise QuarantineError(
                f"The model saved in {path} cannot be loaded with safe_mode=True{where}: {error}",
                hint="import the code that defines its layers: tfguard replay PATH --import "
                "FILE.py (a script that does not train on import), or pass the model that was "
                "training: tfguard.replay(path, model=my_model)",
            ) from error

    def stored_replay(self) -> dict | None:
        """The replay made with the live model when the batch was saved (`replay.json`), if any."""
        path = os.path.join(self.path, REPLAY_FILE)
        if not os.path.isfile(path):
            return None
        record = _read_json(path)
        report = record.get("report") if isinstance(record, dict) else None
        if record.get("format") != REPLAY_FORMAT or not isinstance(report, dict):
            raise QuarantineError(
                f"Received an invalid replay record {path}, expected format {REPLAY_FORMAT!r} "
                "with a 'report' object.")
        return record


def _rebuild(structure: dict, values: dict):
    kind = structure["kind"]
    if kind == "none":
        return None
    if kind == "tensor":
        return values[""]
    if kind == "dict":
        return {str(k): values[str(k)] for k in structure["keys"]}
    items = [values[str(i)] for i in range(int(structure["length"]))]
    return tuple(items) if kind == "tuple" else items


def _read_json(path: str):
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_JSON_BYTES:
                raise ValueError(f"larger than {MAX_JSON_BYTES:,} bytes")
            raw = handle.read(size + 1)  # bounded even if the file grows meanwhile
        if len(raw) > MAX_JSON_BYTES:
            raise ValueError(f"larger than {MAX_JSON_BYTES:,} bytes")
        return json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise QuarantineError(
            f"Received an unreadable file {path}: {type(error).__name__}: {error}, expected "
            "JSON written by tfguard.",
            hint="the quarantine folder is damaged; take the batch from a fresh violation",
        ) from error


def load_quarantine(path: str) -> Quarantine:
    """Loads a quarantine folder without pickle.

    Example:

    >>> load_quarantine("no/such/folder")
    Traceback (most recent call last):
    ...
    tfguard._errors.QuarantineError: Received an invalid quarantine folder 'no/such/folder': 'meta.json' is missing, expected meta.json, batch.npz and weights.npz.
    Try: pass a folder printed by a GuardViolation, e.g. tfguard-quarantine/<model>/batch-N

    Raises:
        QuarantineError: for a missing folder or file, a foreign format, a
            damaged file, or metadata that does not match the arrays.
    """
    path = os.fspath(path)
    missing = [f for f in (META_FILE, *ARRAY_FILES) if not os.path.isfile(os.path.join(path, f))]
    if missing and os.path.isdir(path) and any(
            os.path.isfile(os.path.join(path, f)) for f in (*ARRAY_FILES, MODEL_FILE)):
        raise QuarantineError(
            f"Received an incomplete quarantine folder '{path}': {', '.join(map(repr, missing))} "
            "missing, expected meta.json, batch.npz and weights.npz (meta.json is written last: "
            "the save was cut short, by a full disk or a killed process).",
            hint="take the batch from another violation; remove this folder",
        )
    for needed in missing[:1]:
        raise QuarantineError(
            f"Received an invalid quarantine folder '{path}': '{needed}' is missing, "
            "expected meta.json, batch.npz and weights.npz.",
            hint="pass a folder printed by a GuardViolation, e.g. tfguard-quarantine/<model>/batch-N",
        )
    meta_path = os.path.join(path, META_FILE)
    meta = _read_json(meta_path)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise QuarantineError(
            f"Received an unknown quarantine format in {meta_path}: {found!r}, expected {FORMAT!r}."
        )
    if "stage" not in meta and "checkpoint" in meta:  # written before check stages were named so
        meta["stage"] = meta.pop("checkpoint")
    layouts = meta.get("arrays")  # absent in folders written before tfguard declared them
    layouts = layouts if isinstance(layouts, dict) else {}
    arrays, stored = (read_arrays(os.path.join(path, name), layouts.get(name))
                      for name in ARRAY_FILES)
    try:
        per_role: dict[str, dict] = {role: {} for role in ROLES}
        for key, value in arrays.items():
            role, _, leaf = key.partition(SEPARATOR)
            per_role[role][leaf] = value
        weights = {str(name): stored[f"w{i:05d}"] for i, name in enumerate(meta["variables"])}
        rebuilt = {role: _rebuild(meta["structure"][role], per_role[role]) for role in ROLES}
        int(meta["step"])
        if not isinstance(meta["model"], dict):
            raise TypeError("'model' is not an object")
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise QuarantineError(
            f"Received a quarantine {meta_path} that does not match its arrays: "
            f"{type(error).__name__}: {error}, expected the keys tfguard writes (step, model, "
            "structure, variables) and one array per variable and batch leaf.",
            hint="the quarantine folder is damaged or crafted; take the batch from a fresh violation",
        ) from error
    return Quarantine(path, meta, rebuilt["x"], rebuilt["y"], rebuilt["sample_weight"], weights)
