import shutil

import keras
import numpy as np
import pytest
from rich.console import Console

from tfguard._errors import ExportError
from tfguard.reference import parity, render_parity


def test_parity_holds_on_held_out_samples(export_dir, digits_small):
    result = parity(export_dir, digits_small.x_test, digits_small.y_test, samples=128)
    assert result.samples == 128
    assert [p.name for p in result.pairs] == [
        "keras↔saved_model",
        "keras↔tflite",
        "saved_model↔tflite",
    ]
    for pair in result.pairs:
        assert pair.max_abs_diff <= 1e-5 and pair.argmax_mismatches == 0
    assert result.ok and result.check() is result
    assert set(result.accuracy) == {"keras", "saved_model", "tflite"}
    assert len(set(result.accuracy.values())) == 1
    assert result.to_dict()["ok"] is True


def test_parity_defaults_to_the_dataset_in_the_contract(export_dir):
    result = parity(export_dir, samples=20)
    assert result.samples == 20 and result.ok and result.accuracy


def test_parity_catches_a_model_that_differs(export_dir, digits_small, tmp_path):
    copy = tmp_path / "export"
    shutil.copytree(export_dir, copy)
    (copy / "model.tflite").unlink()
    model = keras.saving.load_model(copy / "model.keras")
    kernel = model.get_layer("output").kernel
    kernel.assign(kernel.numpy() * 1.001)  # a tiny drift, e.g. a re-trained .keras
    model.save(copy / "model.keras")
    result = parity(copy, digits_small.x_test, samples=64)
    assert not result.ok
    assert [p.name for p in result.pairs] == ["keras↔saved_model"]
    assert result.pairs[0].max_abs_diff > 1e-5
    assert result.notes == ["model.tflite not found: TFLite was not compared"]
    with pytest.raises(
        ExportError,
        match=r"keras↔saved_model: max \|diff\| .* \(tolerance 1e-05\), \d+/64 argmax differ",
    ):
        result.check()


def test_parity_refuses_preprocessed_inputs(export_dir, digits_small):
    with pytest.raises(ExportError, match="expected \\(N, 28, 28, 1\\) uint8 as in contract.json"):
        parity(export_dir, digits_small.x_test.astype(np.float32) / 255)


def test_render_parity(export_dir, digits_small):
    console = Console(record=True, width=120)
    render_parity(parity(export_dir, digits_small.x_test, samples=16), console)
    text = console.export_text()
    assert "keras↔tflite" in text and "16/16" in text and "tolerance 1e-05" in text
