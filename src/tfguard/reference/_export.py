"""Export: `.keras`, a SavedModel that takes raw inputs, TFLite, and `contract.json`.

The SavedModel's signatures take inputs *as a user sends them* (for images:
`uint8` pixels `[None, 28, 28, 1]`) and run `tfguard.reference.preprocess`
inside the graph, so the served model and the trained model cannot disagree
about normalization. The data contract is enforced inside the signature:

- dtype: the signature's input spec rejects any other dtype;
- shape: `tf.ensure_shape` in the graph. The input spec alone does not
  reject a wrong shape when the model is called through `signatures[...]`
  (what TF Serving does): a `[8, 27, 28, 1]` batch runs and returns numbers,
  and a rank-3 batch aborts the process inside the convolution;
- value range: `tf.debugging` asserts in the graph, where the dtype does not
  already bound the values (the `serve_float` signature, or float data).
  Serving graphs are not XLA-compiled, so these asserts run (under XLA they
  would compile to nothing; see `tfguard doctor`).

Artifacts in `export_dir`:

    model.keras      model.save (preprocessed float inputs, for Keras users)
    saved_model/     signatures serving_default (= serve) and serve_float
    model.tflite     converted from saved_model/ (serving_default)
    contract.json    shape, dtype, range, preprocessing, class names

The TFLite converter drops `tf.debugging` asserts: `model.tflite` enforces
dtype and shape, not a value range; `contract.json` says so.

Example:

>>> from tfguard.reference import build_model, export_model, load_data
>>> data = load_data("digits", limit=32)
>>> model = build_model("cnn", data.info.input_shape, data.info.num_classes)
>>> result = export_model(model, "/tmp/tfguard-doc-export", data.info)
>>> sorted(result.seconds)
['keras', 'saved_model', 'tflite']
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

import keras
import tensorflow as tf

from tfguard import __version__
from tfguard._errors import ExportError
from tfguard._files import write_atomic
from tfguard.reference._data import DatasetInfo
from tfguard.reference._input import preprocess

CONTRACT_FILE = "contract.json"
KERAS_FILE = "model.keras"
SAVED_MODEL_DIR = "saved_model"
TFLITE_FILE = "model.tflite"
SERVING_KEY = "serving_default"
FLOAT_KEY = "serve_float"
INPUT_NAME = "images"
OUTPUT_NAME = "probabilities"
CONTRACT_VERSION = 1
ARTIFACTS = (KERAS_FILE, SAVED_MODEL_DIR, TFLITE_FILE, CONTRACT_FILE)


@dataclasses.dataclass
class ExportResult:
    """Where an export went and how long each artifact took.

    Args:
        export_dir: the folder.
        keras_path: the `.keras` file.
        saved_model_dir: the SavedModel folder.
        tflite_path: the `.tflite` file, or `None` when not converted.
        contract_path: `contract.json`.
        contract: its content.
        seconds: wall time per artifact (`"keras"`, `"saved_model"`, `"tflite"`).
        notes: facts a user should know (e.g. what TFLite does not enforce).
    """

    export_dir: Path
    keras_path: Path
    saved_model_dir: Path
    tflite_path: Path | None
    contract_path: Path
    contract: dict
    seconds: dict[str, float]
    notes: list[str]


def _range_checked(images: tf.Tensor, low: float, high: float, signature: str) -> tf.Tensor:
    """Fails the graph (InvalidArgumentError) on non-finite or out-of-range inputs."""
    where = f"signature '{signature}'"
    expected = f"expected raw inputs in [{low:g}, {high:g}] as in {CONTRACT_FILE} (not normalized)"
    if images.dtype.is_floating:
        images = tf.debugging.assert_all_finite(
            images, f"{where}: received NaN or Inf inputs, {expected}"
        )
    lo = tf.debugging.assert_greater_equal(
        images,
        tf.cast(low, images.dtype),
        message=f"{where}: received inputs below {low:g}, {expected}",
    )
    hi = tf.debugging.assert_less_equal(
        images,
        tf.cast(high, images.dtype),
        message=f"{where}: received inputs above {high:g}, {expected}",
    )
    with tf.control_dependencies([lo, hi]):
        return tf.identity(images)


def _dtype_bounds(dtype: tf.DType) -> tuple[float, float] | None:
    return (float(dtype.min), float(dtype.max)) if dtype.is_integer else None


def serving_functions(model: keras.Model, info: DatasetInfo) -> dict[str, tuple]:
    """The serving endpoints: `{name: (fn, input_signature, checks)}`.

    `serve` takes `info.dtype`; when that is `uint8`, `serve_float` takes
    the same raw values as `float32`. Both run `preprocess` and the model.

    Args:
        model: a Keras model taking preprocessed inputs.
        info: the dataset's input contract.

    Returns:
        A dict of endpoint name to `(function, [tf.TensorSpec], checks)`,
        where `checks` lists what the graph enforces.
    """
    low, high = (float(v) for v in info.value_range)
    shape = [None, *info.input_shape]
    raw_dtype = tf.as_dtype(info.dtype)

    def make(dtype: tf.DType, name: str):
        needs_range = _dtype_bounds(dtype) != (low, high)

        def fn(images):
            images = tf.ensure_shape(images, shape)
            if needs_range:
                images = _range_checked(images, low, high, name)
            return {OUTPUT_NAME: model(preprocess(images, (low, high)), training=False)}

        checks = ["dtype", "shape"] + (["finite"] if dtype.is_floating else [])
        checks += ["range"] if needs_range else []
        return fn, [tf.TensorSpec(shape, dtype, name=INPUT_NAME)], checks

    endpoints = {"serve": make(raw_dtype, SERVING_KEY)}
    if raw_dtype == tf.uint8:
        endpoints[FLOAT_KEY] = make(tf.float32, FLOAT_KEY)
    return endpoints


def export_model(
    model: keras.Model,
    export_dir: str | Path,
    info: DatasetInfo,
    *,
    tflite: bool = True,
    overwrite: bool = True,
) -> ExportResult:
    """Exports a model with its preprocessing and input contract.

    Args:
        model: a Keras model taking preprocessed inputs (e.g. from `train`).
        export_dir: the folder to write.
        info: the dataset's input contract (`LoadedData.info`).
        tflite: also convert to TFLite. Defaults to `True`.
        overwrite: replace the artifacts of a previous export in that folder
            (other files are left alone). Defaults to `True`.

    Returns:
        An `ExportResult`.

    Raises:
        ExportError: the folder holds an export and `overwrite` is `False`,
            or saving / converting failed.
    """
    export_dir = Path(export_dir)
    existing = [a for a in ARTIFACTS if (export_dir / a).exists()]
    if existing and not overwrite:
        raise ExportError(
            f"The export folder {str(export_dir)!r} already holds {', '.join(existing)}, "
            "expected an empty folder when overwrite=False.",
            hint="pick another folder or pass overwrite=True.",
        )
    for name in existing:
        target = export_dir / name
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
    export_dir.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    notes: list[str] = []

    keras_path = export_dir / KERAS_FILE
    start = time.perf_counter()
    try:
        model.save(keras_path)
    except Exception as e:  # Keras raises many types while serializing
        raise ExportError(f"Saving {str(keras_path)!r} failed: {e}") from e
    seconds["keras"] = time.perf_counter() - start

    endpoints = serving_functions(model, info)
    sm_dir = export_dir / SAVED_MODEL_DIR
    start = time.perf_counter()
    try:
        archive = keras.export.ExportArchive()
        archive.track(model)
        for name, (fn, signature, _) in endpoints.items():
            archive.add_endpoint(name, fn, input_signature=signature)
        archive.write_out(str(sm_dir), verbose=False)
    except Exception as e:
        raise ExportError(f"Writing the SavedModel {str(sm_dir)!r} failed: {e}") from e
    seconds["saved_model"] = time.perf_counter() - start

    tflite_path = None
    serve_checks = endpoints["serve"][2]
    if tflite:
        tflite_path = export_dir / TFLITE_FILE
        start = time.perf_counter()
        try:
            converter = tf.lite.TFLiteConverter.from_saved_model(
                str(sm_dir), signature_keys=[SERVING_KEY]
            )
            tflite_path.write_bytes(converter.convert())
        except Exception as e:
            raise ExportError(
                f"Converting {str(sm_dir)!r} to TFLite failed: {e}",
                hint="export with tflite=False to skip the conversion.",
            ) from e
        seconds["tflite"] = time.perf_counter() - start
        if "range" in serve_checks:
            notes.append(
                "model.tflite does not enforce the value range: the TFLite converter drops "
                "tf.debugging asserts. Check the range before calling it."
            )

    contract = make_contract(model, info, endpoints, tflite_path is not None)
    contract_path = export_dir / CONTRACT_FILE
    write_atomic(contract_path, json.dumps(contract, indent=2) + "\n")
    return ExportResult(
        export_dir=export_dir,
        keras_path=keras_path,
        saved_model_dir=sm_dir,
        tflite_path=tflite_path,
        contract_path=contract_path,
        contract=contract,
        seconds=seconds,
        notes=notes,
    )


def make_contract(model: keras.Model, info: DatasetInfo, endpoints: dict, tflite: bool) -> dict:
    """The content of `contract.json` (see `export_model`)."""

    low, high = info.value_range
    serve_checks = endpoints["serve"][2]
    signatures = {}
    for name, (_, signature, checks) in endpoints.items():
        key = SERVING_KEY if name == "serve" else name
        signatures[key] = {"input": INPUT_NAME, "dtype": signature[0].dtype.name, "checks": checks}
    return {
        "format": "tfguard.contract",
        "version": CONTRACT_VERSION,
        "input": {
            "name": INPUT_NAME,
            "shape": [None, *info.input_shape],
            "dtype": info.dtype,
            "range": [low, high],
        },
        "preprocessing": {
            "function": "tfguard.reference.preprocess",
            "formula": f"(float32(x) - {low:g}) / ({high:g} - {low:g})",
            "in_graph": True,
            "model_input_range": [0.0, 1.0],
        },
        "output": {
            "name": OUTPUT_NAME,
            "shape": [None, info.num_classes],
            "dtype": "float32",
            "kind": "softmax probabilities",
        },
        "class_names": list(info.class_names),
        "dataset": info.to_dict(),
        "signatures": signatures,
        "artifacts": {
            "keras": KERAS_FILE,
            "keras_input": "preprocessed float32 in [0, 1]",
            "saved_model": SAVED_MODEL_DIR,
            "tflite": TFLITE_FILE if tflite else None,
        },
        "tflite": {
            "signature": SERVING_KEY,
            "checks": [c for c in serve_checks if c in ("dtype", "shape")],
            "enforces_range": False,
        }
        if tflite
        else None,
        "xla": "serving signatures are not XLA-compiled: their tf.debugging asserts run",
        "model": model.name,
        "versions": {
            "tfguard": __version__,
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
        },
    }


def load_contract(export_dir: str | Path) -> dict:
    """Reads `contract.json` of an export.

    Args:
        export_dir: the export folder.

    Returns:
        The contract as a dict.

    Raises:
        ExportError: the file is missing or not a tfguard contract.
    """
    path = Path(export_dir) / CONTRACT_FILE
    try:
        contract = json.loads(path.read_text())
    except FileNotFoundError as e:
        raise ExportError(
            f"{str(path)!r} does not exist, expected an export folder made by tfguard.",
            hint="run `tfguard export` (or train with --export-dir) first.",
        ) from e
    except json.JSONDecodeError as e:
        raise ExportError(f"{str(path)!r} is not valid JSON: {e}") from e
    if contract.get("format") != "tfguard.contract":
        raise ExportError(
            f"{str(path)!r} is not a tfguard contract. Received: format={contract.get('format')!r}"
        )
    return contract


def export_run(run_dir: str | Path, export_dir: str | Path | None = None, **kwargs) -> ExportResult:
    """Exports the model `train` saved in a run directory.

    Reads `run_dir/model.keras` and `run_dir/dataset.json` (written by `train`).

    Args:
        run_dir: the run directory.
        export_dir: the export folder, or `None` for `run_dir/export`. Defaults to `None`.
        **kwargs: passed to `export_model`.

    Returns:
        An `ExportResult`.

    Raises:
        ExportError: the run directory lacks the model or dataset description.
    """
    run_dir = Path(run_dir)
    model_path, info_path = run_dir / KERAS_FILE, run_dir / "dataset.json"
    missing = [p.name for p in (model_path, info_path) if not p.is_file()]
    if missing:
        raise ExportError(
            f"The run directory {str(run_dir)!r} lacks {', '.join(missing)}, expected a run "
            "directory written by `tfguard train`.",
            hint="train first, or pass the run directory `tfguard train` printed.",
        )
    info_dict = json.loads(info_path.read_text())
    info = DatasetInfo(
        **{
            **info_dict,
            "input_shape": tuple(info_dict["input_shape"]),
            "value_range": tuple(info_dict["value_range"]),
            "class_names": tuple(info_dict["class_names"]),
        }
    )
    model = keras.saving.load_model(model_path)
    return export_model(model, export_dir or run_dir / "export", info, **kwargs)


def render_export(result: ExportResult, console) -> None:
    """Prints the artifacts, their sizes and times to a `rich.console.Console`.

    Args:
        result: what `export_model` returned.
        console: a `rich.console.Console`.
    """
    from rich.table import Table

    table = Table(title=f"export {result.export_dir}")
    for col in ("artifact", "size", "time"):
        table.add_column(col)

    def size(p: Path) -> str:
        n = (
            sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
            if p.is_dir()
            else p.stat().st_size
        )
        return f"{n / 1e6:.2f} MB"

    rows = [("keras", result.keras_path), ("saved_model", result.saved_model_dir)]
    if result.tflite_path is not None:
        rows.append(("tflite", result.tflite_path))
    for key, path in rows:
        table.add_row(str(path), size(path), f"{result.seconds[key]:.2f} s")
    table.add_row(str(result.contract_path), size(result.contract_path), "")
    console.print(table)
    c = result.contract["input"]
    console.print(
        f"input contract: {c['name']} {c['dtype']} {c['shape']} in {c['range']}, "
        f"preprocessing {result.contract['preprocessing']['formula']} inside the graph"
    )
    for note in result.notes:
        console.print(f"[yellow]note[/yellow]: {note}")
