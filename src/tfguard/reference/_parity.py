"""Parity: the exported artifacts must answer like the trained model.

Runs the same raw held-out inputs through three backends and compares every
pair:

- `keras`: `model.keras` called on `preprocess(raw)` (the training path);
- `saved_model`: the `serving_default` signature on `raw` (preprocessing in
  the graph);
- `tflite`: `model.tflite` with `ai_edge_litert.interpreter.Interpreter` on `raw`.

A pair passes when the largest absolute difference of the fp32 outputs is
at most `tolerance` (1e-5) and every argmax agrees.

Example:

>>> from tfguard.reference import parity
>>> result = parity("/tmp/tfguard-doc-export", samples=16)   # doctest: +SKIP
>>> result.ok, [p.name for p in result.pairs]                # doctest: +SKIP
(True, ['keras↔saved_model', 'keras↔tflite', 'saved_model↔tflite'])
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from pathlib import Path

import numpy as np

from tfguard._errors import ExportError
from tfguard.reference._data import load_data
from tfguard.reference._export import (
    INPUT_NAME,
    KERAS_FILE,
    OUTPUT_NAME,
    SAVED_MODEL_DIR,
    SERVING_KEY,
    TFLITE_FILE,
    load_contract,
)
from tfguard.reference._extras import road_module
from tfguard.reference._input import preprocess

TOLERANCE = 1e-5


@dataclasses.dataclass(frozen=True)
class PairParity:
    """The comparison of two backends.

    Args:
        a: first backend name.
        b: second backend name.
        max_abs_diff: largest absolute difference of any output value.
        argmax_mismatches: samples whose predicted class differs.
        samples: samples compared.
    """

    a: str
    b: str
    max_abs_diff: float
    argmax_mismatches: int
    samples: int

    @property
    def name(self) -> str:
        """`"a↔b"`."""
        return f"{self.a}↔{self.b}"

    def ok(self, tolerance: float = TOLERANCE) -> bool:
        """Whether the pair is within `tolerance` with every argmax equal."""
        return self.max_abs_diff <= tolerance and self.argmax_mismatches == 0


@dataclasses.dataclass
class ParityResult:
    """Keras vs SavedModel vs TFLite on the same raw inputs.

    Args:
        export_dir: the export compared.
        samples: number of inputs.
        pairs: one `PairParity` per pair of backends.
        tolerance: the fp32 tolerance.
        seconds: inference wall time per backend.
        accuracy: accuracy per backend when labels were given, else `{}`.
        notes: facts worth knowing (e.g. a backend that was missing).
    """

    export_dir: Path
    samples: int
    pairs: list[PairParity]
    tolerance: float
    seconds: dict[str, float]
    accuracy: dict[str, float]
    notes: list[str]

    @property
    def ok(self) -> bool:
        """True when every pair is within tolerance with equal argmax."""
        return all(p.ok(self.tolerance) for p in self.pairs)

    def check(self) -> ParityResult:
        """Raises when parity does not hold.

        Returns:
            `self`, so `parity(...).check()` chains.

        Raises:
            ExportError: naming each failing pair with its numbers.
        """
        bad = [p for p in self.pairs if not p.ok(self.tolerance)]
        if bad:
            details = "; ".join(
                f"{p.name}: max |diff| {p.max_abs_diff:.3g} (tolerance {self.tolerance:g}), "
                f"{p.argmax_mismatches}/{p.samples} argmax differ"
                for p in bad
            )
            raise ExportError(
                f"Parity failed for {self.export_dir} on {self.samples} samples: {details}.",
                hint="re-export from the trained model; check that nothing edits the "
                "artifacts, and compare the TFLite conversion options.",
            )
        return self

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {
            "export_dir": str(self.export_dir),
            "samples": self.samples,
            "tolerance": self.tolerance,
            "ok": self.ok,
            "pairs": [
                {**dataclasses.asdict(p), "name": p.name, "ok": p.ok(self.tolerance)}
                for p in self.pairs
            ],
            "seconds": self.seconds,
            "accuracy": self.accuracy,
            "notes": self.notes,
        }


def _raw_inputs(contract: dict, x_raw, labels, samples: int, seed: int):
    if x_raw is None:

        data = load_data(contract["dataset"]["spec"])
        x_raw, labels = data.x_test, data.y_test
    x_raw = np.asarray(x_raw)
    want_shape = tuple(contract["input"]["shape"][1:])
    want_dtype = contract["input"]["dtype"]
    if x_raw.shape[1:] != want_shape or x_raw.dtype.name != want_dtype:
        raise ExportError(
            f"Received raw inputs of shape {x_raw.shape} and dtype {x_raw.dtype}, expected "
            f"(N, {', '.join(map(str, want_shape))}) {want_dtype} as in contract.json.",
            hint="pass the raw inputs a user would send, before any normalization.",
        )
    if len(x_raw) == 0:
        raise ExportError("Received no inputs for the parity check, expected at least one.")
    if len(x_raw) > samples:
        idx = np.sort(np.random.default_rng(seed).permutation(len(x_raw))[:samples])
        x_raw = x_raw[idx]
        labels = None if labels is None else np.asarray(labels)[idx]
    return x_raw, labels


def run_tflite(path: str | Path, x_raw: np.ndarray) -> np.ndarray:
    """Runs `model.tflite`'s `serving_default` on a batch with ai-edge-litert.

    Args:
        path: the `.tflite` file.
        x_raw: raw inputs, any batch size.

    Returns:
        The `probabilities` output as a numpy array.
    """
    interpreter = road_module("ai_edge_litert.interpreter", "Running the TFLite export (parity of `model.tflite`)")
    runner = interpreter.Interpreter(model_path=str(path)).get_signature_runner(SERVING_KEY)
    return np.asarray(runner(**{INPUT_NAME: x_raw})[OUTPUT_NAME])


def parity(
    export_dir: str | Path,
    x_raw: np.ndarray | None = None,
    labels: np.ndarray | None = None,
    *,
    samples: int = 256,
    tolerance: float = TOLERANCE,
    seed: int = 0,
) -> ParityResult:
    """Compares Keras, SavedModel and TFLite on the same raw inputs.

    Args:
        export_dir: a folder written by `export_model`.
        x_raw: raw inputs as a user sends them, or `None` to use the
            held-out test split of the dataset named in `contract.json`.
            Defaults to `None`.
        labels: integer labels of `x_raw` for per-backend accuracy, or
            `None`. Defaults to `None`.
        samples: at most this many inputs (a deterministic subset). Defaults to `256`.
        tolerance: largest allowed absolute difference of fp32 outputs.
            Defaults to `1e-5`.
        seed: seed of the subset. Defaults to `0`.

    Returns:
        A `ParityResult` (call `.check()` to raise on failure).

    Raises:
        ExportError: the export is incomplete or the inputs break its contract.
        DataError: `x_raw` is `None` and the dataset cannot be loaded.
    """
    import keras
    import tensorflow as tf


    export_dir = Path(export_dir)
    contract = load_contract(export_dir)
    x_raw, labels = _raw_inputs(contract, x_raw, labels, samples, seed)
    outputs: dict[str, np.ndarray] = {}
    seconds: dict[str, float] = {}
    notes: list[str] = []

    keras_path = export_dir / KERAS_FILE
    sm_dir = export_dir / SAVED_MODEL_DIR
    for required in (keras_path, sm_dir):
        if not required.exists():
            raise ExportError(
                f"The export {str(export_dir)!r} lacks {required.name}, expected the artifacts "
                "written by export_model.",
                hint="export again.",
            )
    model = keras.saving.load_model(keras_path)
    start = time.perf_counter()
    value_range = contract["input"]["range"]
    outputs["keras"] = np.asarray(model(preprocess(x_raw, value_range), training=False))
    seconds["keras"] = time.perf_counter() - start

    signature = tf.saved_model.load(str(sm_dir)).signatures[SERVING_KEY]
    start = time.perf_counter()
    outputs["saved_model"] = signature(**{INPUT_NAME: tf.constant(x_raw)})[OUTPUT_NAME].numpy()
    seconds["saved_model"] = time.perf_counter() - start

    tflite_path = export_dir / TFLITE_FILE
    if tflite_path.is_file():
        start = time.perf_counter()
        outputs["tflite"] = run_tflite(tflite_path, x_raw)
        seconds["tflite"] = time.perf_counter() - start
    else:
        notes.append(f"{TFLITE_FILE} not found: TFLite was not compared")

    pairs = []
    for a, b in itertools.combinations(outputs, 2):
        ya, yb = outputs[a].astype(np.float32), outputs[b].astype(np.float32)
        pairs.append(
            PairParity(
                a=a,
                b=b,
                max_abs_diff=float(np.max(np.abs(ya - yb))),
                argmax_mismatches=int(np.sum(ya.argmax(-1) != yb.argmax(-1))),
                samples=len(x_raw),
            )
        )
    accuracy = {}
    if labels is not None:
        labels = np.asarray(labels).reshape(-1)
        accuracy = {k: float(np.mean(v.argmax(-1) == labels)) for k, v in outputs.items()}
    return ParityResult(
        export_dir=export_dir,
        samples=len(x_raw),
        pairs=pairs,
        tolerance=float(tolerance),
        seconds=seconds,
        accuracy=accuracy,
        notes=notes,
    )


def render_parity(result: ParityResult, console) -> None:
    """Prints a parity table to a `rich.console.Console`.

    Args:
        result: what `parity` returned.
        console: a `rich.console.Console`.
    """
    from rich.table import Table

    table = Table(title=f"parity of {result.export_dir} on {result.samples} held-out samples")
    for col in ("pair", "max |diff|", "argmax agree", "status"):
        table.add_column(col)
    for p in result.pairs:
        ok = p.ok(result.tolerance)
        table.add_row(
            p.name,
            f"{p.max_abs_diff:.2e}",
            f"{p.samples - p.argmax_mismatches}/{p.samples}",
            "[green]ok[/green]" if ok else "[red]FAIL[/red]",
        )
    console.print(table)
    timing = ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in result.seconds.items())
    console.print(f"tolerance {result.tolerance:g} (fp32); inference time: {timing}")
    if result.accuracy:
        console.print("accuracy: " + ", ".join(f"{k} {v:.4f}" for k, v in result.accuracy.items()))
    for note in result.notes:
        console.print(f"[yellow]note[/yellow]: {note}")
