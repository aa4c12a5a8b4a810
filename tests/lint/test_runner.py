import keras
import numpy as np
import pytest
import tensorflow as tf

from tfguard._errors import ContractError, TfguardError
from tfguard.lint._runner import lint, lint_saved_model, sample_batch

L = keras.layers
AUTOTUNE = tf.data.AUTOTUNE


@pytest.fixture
def classifier(seq):
    model = seq(
        L.Dense(16, activation="relu"), L.Dense(10, activation="softmax"), input_shape=(64,)
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def codes(findings):
    return [f.code for f in findings]


def test_healthy_model_and_pipeline(classifier, digits):
    x, y = digits
    ds = (
        tf.data.Dataset.from_tensor_slices((x / 16.0, y)).shuffle(2048).batch(64).prefetch(AUTOTUNE)
    )
    assert lint(classifier, dataset=ds) == []
    assert lint(classifier, x=x[:64] / 16.0, y=y[:64]) == []


def test_batch_from_dataset_is_checked(classifier, digits):
    x, y = digits
    ds = tf.data.Dataset.from_tensor_slices((x, y + 1)).batch(64).shuffle(4)
    found = codes(lint(classifier, dataset=ds))
    assert found == ["shuffle_after_batch", "no_prefetch", "raw_pixels", "class_id_out_of_range"]


def test_unbatched_dataset_is_batched_for_the_sample(classifier, digits):
    x, y = digits
    ds = tf.data.Dataset.from_tensor_slices((x / 16.0, y))
    sample_x, sample_y = sample_batch(ds)
    assert sample_x.shape == (256, 64) and sample_y.shape == (256,)
    assert codes(lint(classifier, dataset=ds)) == ["no_prefetch"]


def test_given_x_y_win_over_the_dataset(classifier, digits):
    x, y = digits
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).prefetch(1)
    assert codes(lint(classifier, x=x[:8] / 16.0, y=y[:8], dataset=ds)) == []


def test_sample_batch_shapes():
    only_x = tf.data.Dataset.from_tensor_slices(np.zeros((4, 3))).batch(2)
    x, y = sample_batch(only_x)
    assert x.shape == (2, 3) and y is None
    weighted = tf.data.Dataset.from_tensor_slices((np.zeros((4, 3)), np.ones(4), np.ones(4))).batch(
        2
    )
    x, y = sample_batch(weighted)
    assert y.tolist() == [1.0, 1.0]
    assert sample_batch(tf.data.Dataset.range(0).batch(2)) == (None, None)


def test_unreadable_sample_is_skipped(classifier):
    text = tf.data.Dataset.from_tensor_slices((["a", "b"], [0, 1])).batch(2).prefetch(1)
    assert lint(classifier, dataset=text) == []


def test_model_only_and_data_only(classifier):
    assert lint(classifier) == []
    assert codes(lint(x=np.full((4, 8, 8), 200, dtype=np.uint8))) == ["raw_pixels"]


def test_bad_arguments():
    with pytest.raises(ContractError, match="at least one"):
        lint()
    with pytest.raises(ContractError, match="keras.Model"):
        lint(model="model.keras")


def test_saved_model_round_trip(tmp_path, seq):
    good = seq(L.Dense(3, activation="softmax"))
    good.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    good.save(tmp_path / "good.keras")
    assert lint_saved_model(tmp_path / "good.keras") == []
    bad = seq(L.Dense(1))
    bad.compile(optimizer="adam", loss="binary_crossentropy")
    bad.save(tmp_path / "bad.keras")
    (f,) = lint_saved_model(str(tmp_path / "bad.keras"))
    assert (f.code, f.severity) == ("logits_without_from_logits", "error")


def test_saved_model_errors(tmp_path, seq):
    with pytest.raises(ContractError, match="ending in `.keras`") as wrong_suffix:
        lint_saved_model(tmp_path / "model.h5")
    assert wrong_suffix.value.hint
    with pytest.raises(ContractError, match="does not exist"):
        lint_saved_model(tmp_path / "missing.keras")
    unsafe = seq(L.Lambda(lambda t: t * 2.0), L.Dense(1))
    unsafe.save(tmp_path / "lambda.keras")
    with pytest.raises(ContractError, match="safe_mode=True") as err:
        lint_saved_model(tmp_path / "lambda.keras")
    assert isinstance(err.value, TfguardError) and "Lambda" in err.value.hint
    (tmp_path / "junk.keras").write_bytes(b"not a zip")
    with pytest.raises(ContractError):
        lint_saved_model(tmp_path / "junk.keras")
