import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfguard._errors import ExportError
from tfguard.reference import build_model, export_model, export_run, load_contract, preprocess
from tfguard.reference._data import DatasetInfo
from tfguard.reference._parity import run_tflite


@pytest.fixture(scope="module")
def served(export_dir):
    return tf.saved_model.load(str(export_dir / "saved_model"))


@pytest.fixture(scope="module")
def keras_model(export_dir):
    return keras.saving.load_model(export_dir / "model.keras")


def test_artifacts_and_contract(demo_run, export_dir):
    names = sorted(p.name for p in export_dir.iterdir())
    assert names == ["contract.json", "model.keras", "model.tflite", "saved_model"]
    contract = json.loads((export_dir / "contract.json").read_text())
    assert contract == load_contract(export_dir)
    assert contract["input"] == {
        "name": "images",
        "shape": [None, 28, 28, 1],
        "dtype": "uint8",
        "range": [0, 255],
    }
    assert contract["preprocessing"]["formula"] == "(float32(x) - 0) / (255 - 0)"
    assert contract["preprocessing"]["in_graph"] is True
    assert contract["class_names"] == [str(i) for i in range(10)]
    assert contract["output"]["shape"] == [None, 10]
    assert contract["signatures"]["serving_default"]["checks"] == ["dtype", "shape"]
    assert contract["signatures"]["serve_float"]["checks"] == ["dtype", "shape", "finite", "range"]
    assert contract["tflite"]["enforces_range"] is False
    assert set(demo_run.export.seconds) == {"keras", "saved_model", "tflite"}


def test_train_serve_skew_is_impossible(served, keras_model, digits_small):
    raw = digits_small.x_test[:64]
    served_out = served.signatures["serving_default"](images=tf.constant(raw))["probabilities"]
    trained_out = keras_model(preprocess(raw), training=False)
    np.testing.assert_allclose(served_out.numpy(), trained_out.numpy(), rtol=0, atol=1e-6)
    assert (served_out.numpy().argmax(-1) == trained_out.numpy().argmax(-1)).all()
    # what skew would look like: the model fed raw pixels without the preprocessing
    skewed = keras_model(raw.astype(np.float32), training=False).numpy()
    assert np.abs(skewed - served_out.numpy()).max() > 1e-2


def test_wrong_dtype_is_rejected_by_the_signature(served, digits_small):
    with pytest.raises((tf.errors.InvalidArgumentError, TypeError), match="uint8"):
        served.signatures["serving_default"](
            images=tf.constant(digits_small.x_test[:2], tf.float32)
        )


@pytest.mark.parametrize("shape", [(2, 27, 28, 1), (2, 28, 28), (1, 2, 28, 28, 1), (2, 28, 28, 3)])
def test_wrong_shape_is_rejected_inside_the_graph(served, shape):
    bad = tf.zeros(shape, tf.uint8)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not compatible with expected shape"):
        served.signatures["serving_default"](images=bad)
    with pytest.raises((TypeError, ValueError)):
        served.serve(bad)  # the restored function checks its input spec too


@pytest.mark.parametrize(
    "value, message",
    [
        (300.0, "received inputs above 255"),
        (-1.0, "received inputs below 0"),
        (np.nan, "NaN or Inf"),
    ],
)
def test_float_signature_rejects_out_of_contract_values(served, digits_small, value, message):
    images = digits_small.x_test[:2].astype(np.float32)
    images[0, 3, 3, 0] = value
    with pytest.raises(tf.errors.InvalidArgumentError, match=message) as err:
        served.signatures["serve_float"](images=tf.constant(images))
    assert "serve_float" in str(err.value) and "contract.json" in str(err.value)


def test_float_signature_answers_like_uint8_in_range(served, digits_small):
    raw = digits_small.x_test[:8]
    a = served.signatures["serving_default"](images=tf.constant(raw))["probabilities"].numpy()
    b = served.signatures["serve_float"](images=tf.constant(raw, tf.float32))[
        "probabilities"
    ].numpy()
    np.testing.assert_array_equal(a, b)


def test_serving_graph_is_not_xla_compiled(served):
    """The asserts above ran; also no function in the graph asks for XLA."""
    graph = served.signatures["serve_float"].graph.as_graph_def()
    ops = {n.op for f in graph.library.function for n in f.node_def}
    assert "Assert" in ops and "EnsureShape" in ops
    for f in graph.library.function:
        assert "_XlaMustCompile" not in f.attr or not f.attr["_XlaMustCompile"].b


def test_tflite_runs_raw_uint8_with_litert(export_dir, keras_model, digits_small):
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(export_dir / "model.tflite"))
    details = interpreter.get_signature_runner("serving_default").get_input_details()
    assert details["images"]["dtype"] == np.uint8
    raw = digits_small.x_test[:16]
    out = run_tflite(export_dir / "model.tflite", raw)
    np.testing.assert_allclose(out, keras_model(preprocess(raw)).numpy(), atol=1e-5)


def test_overwrite_false_refuses_and_overwrite_keeps_other_files(
    tmp_path, keras_model, digits_small
):
    (tmp_path / "README").write_text("mine")
    export_model(keras_model, tmp_path, digits_small.info, tflite=False)
    with pytest.raises(ExportError, match="already holds model.keras, saved_model, contract.json"):
        export_model(keras_model, tmp_path, digits_small.info, overwrite=False)
    result = export_model(keras_model, tmp_path, digits_small.info, tflite=False)
    assert (tmp_path / "README").read_text() == "mine" and result.tflite_path is None


def test_export_run_from_a_run_directory(demo_run, tmp_path):
    result = export_run(demo_run.train.run_dir, tmp_path / "again", tflite=False)
    assert result.contract["input"] == demo_run.export.contract["input"]
    with pytest.raises(ExportError, match="lacks model.keras, dataset.json"):
        export_run(tmp_path)


def test_float_data_exports_a_range_checked_signature(tmp_path):
    info = DatasetInfo(
        name="npz-f",
        spec="npz:f.npz",
        input_shape=(6,),
        num_classes=3,
        dtype="float32",
        value_range=(0.0, 1.0),
        class_names=("a", "b", "c"),
    )
    model = build_model("mlp", (6,), 3)
    result = export_model(model, tmp_path, info)
    assert list(result.contract["signatures"]) == ["serving_default"]
    assert any("does not enforce the value range" in note for note in result.notes)
    served = tf.saved_model.load(str(tmp_path / "saved_model")).signatures["serving_default"]
    ok = served(images=tf.fill([2, 6], 0.5))["probabilities"]
    np.testing.assert_allclose(ok.numpy(), model(tf.fill([2, 6], 0.5)).numpy(), atol=1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError, match="above 1"):
        served(images=tf.fill([2, 6], 2.0))
    # the TFLite converter drops the assert: the .tflite model answers out-of-range inputs
    out = run_tflite(tmp_path / "model.tflite", np.full((2, 6), 2.0, np.float32))
    assert out.shape == (2, 3)


def test_load_contract_errors(tmp_path):
    with pytest.raises(ExportError, match="does not exist"):
        load_contract(tmp_path)
    (tmp_path / "contract.json").write_text('{"format": "other"}')
    with pytest.raises(ExportError, match="not a tfguard contract"):
        load_contract(tmp_path)
