import keras
import numpy as np
import pytest
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard.lint._inputs import lint_inputs

L = keras.layers


@pytest.fixture
def pixels(rng):
    return rng.integers(0, 256, size=(16, 12, 12, 1), dtype=np.uint8)


@pytest.fixture
def cnn(seq):
    def build(*front):
        return seq(
            *front,
            L.Conv2D(4, 3, activation="relu"),
            L.Flatten(),
            L.Dense(10),
            input_shape=(12, 12, 1),
        )

    return build


def codes(findings):
    return [f.code for f in findings]


def test_raw_uint8_pixels_without_rescaling(cnn, pixels):
    (f,) = lint_inputs(pixels, cnn())
    assert (f.id, f.code, f.severity) == ("unnormalized_input", "raw_pixels", "warning")
    assert f.evidence["max"] > 200 and f.evidence["front"] == "raw"
    assert "conv2d" in f.where
    assert "Rescaling(1.0 / 255)" in f.suggestion


@pytest.mark.parametrize(
    "front",
    [
        [L.Rescaling(1.0 / 255)],
        [L.RandomFlip("horizontal"), L.Rescaling(1.0 / 255)],
        [L.Resizing(12, 12), L.BatchNormalization()],
        [L.Normalization(mean=127.0, variance=5000.0)],
    ],
)
def test_normalizing_front_gives_no_finding(cnn, pixels, front):
    assert lint_inputs(pixels, cnn(*front)) == []


def test_augmentation_before_weights_is_still_raw(cnn, pixels):
    assert codes(lint_inputs(pixels, cnn(L.RandomFlip("horizontal"), L.RandomRotation(0.1)))) == [
        "raw_pixels"
    ]


def test_float_pixels_from_resize_are_raw(cnn, pixels):
    resized = tf.image.resize(pixels, (12, 12), method="bilinear").numpy()
    assert codes(lint_inputs(resized * 0.999 + 0.0001, cnn())) == ["raw_pixels"]


def test_real_digits_unscaled_then_scaled(seq, digits):
    x, _ = digits
    model = seq(L.Dense(32, activation="relu"), L.Dense(10), input_shape=(64,))
    (f,) = lint_inputs(x[:128], model)
    assert f.code == "raw_pixels"
    assert f.evidence["max"] == 16.0
    assert "Rescaling(1.0 / 16)" in f.suggestion
    assert lint_inputs(x[:128] / 16.0, model) == []


def test_double_rescaling(cnn, pixels):
    scaled = pixels.astype("float32") / 255.0
    (f,) = lint_inputs(scaled, cnn(L.Rescaling(1.0 / 255)))
    assert (f.code, f.severity) == ("double_rescaling", "warning")
    assert abs(f.evidence["scale"] - 1 / 255) < 1e-9


def test_well_scaled_images_give_no_finding(cnn, rng):
    assert lint_inputs(rng.random((16, 12, 12, 1)).astype("float32"), cnn()) == []
    assert lint_inputs(rng.uniform(-1, 1, (16, 12, 12, 1)), cnn()) == []


def test_binary_masks_are_not_pixels(cnn, rng):
    assert lint_inputs(rng.integers(0, 2, (16, 12, 12, 1), dtype=np.uint8), cnn()) == []


@pytest.fixture
def tabular(rng):
    return np.c_[rng.normal(size=256), rng.normal(size=256) * 3.0, rng.integers(0, 2, 256)]


def test_healthy_tabular(seq, tabular):
    assert lint_inputs(tabular, seq(L.Dense(4), input_shape=(3,))) == []


def test_feature_scale_spread_and_threshold(seq, tabular):
    x = tabular.copy()
    x[:, 1] *= 1e5
    model = seq(L.Dense(4), input_shape=(3,))
    (f,) = lint_inputs(x, model)
    assert f.code == "feature_scale_spread"
    assert f.evidence["largest_std_feature"] == 1
    assert f.evidence["std_ratio"] > 1e3 and f.evidence["threshold"] == 1e3
    relaxed = lint_inputs(x, model, max_std_ratio=1e7)
    assert codes(relaxed) == ["large_magnitude"]  # the spread is gone, the magnitude is not
    normalized = seq(L.Normalization(mean=0.0, variance=1.0), L.Dense(4), input_shape=(3,))
    assert lint_inputs(x, normalized) == []


def test_large_offset(seq, rng):
    years = 2010 + rng.normal(size=256) * 3
    x = np.c_[rng.normal(size=256), years]
    (f,) = lint_inputs(x, seq(L.Dense(4), input_shape=(2,)))
    assert f.code == "large_offset"
    assert f.evidence["worst_feature"] == 1
    assert 2000 < f.evidence["worst_mean"] < 2020


def test_large_magnitude(seq, rng):
    x = rng.normal(size=(64, 2)) * 5e4
    (f,) = lint_inputs(x, seq(L.Dense(4), input_shape=(2,)))
    assert f.code == "large_magnitude"
    assert lint_inputs(x, seq(L.Dense(4), input_shape=(2,)), max_abs_value=1e6) == []


def test_nonfinite_input(seq, rng):
    x = rng.normal(size=(8, 3))
    x[2, 1] = np.nan
    (f,) = lint_inputs(x, seq(L.Dense(2), input_shape=(3,)))
    assert (f.id, f.code, f.severity, f.evidence["count"]) == (
        "nonfinite",
        "nonfinite_input",
        "error",
        1,
    )


def test_embedding_front_takes_ids(seq):
    model = seq(L.Embedding(1000, 8), L.Flatten(), L.Dense(2), input_shape=(5,))
    ids = np.random.default_rng(0).integers(0, 1000, (16, 5))
    assert lint_inputs(ids, model) == []


def test_unreadable_front_op_is_not_flagged(pixels):
    inp = keras.Input((12, 12, 1))
    x = L.Lambda(lambda t: t / 255.0)(inp)
    model = keras.Model(inp, L.Dense(2)(L.Flatten()(x)))
    assert lint_inputs(pixels, model) == []


def test_functional_multi_input_dict(rng, pixels):
    image = keras.Input((12, 12, 1), name="image")
    meta = keras.Input((2,), name="meta")
    a = L.Flatten()(L.Rescaling(1 / 255)(image))
    b = L.Dense(4)(meta)
    model = keras.Model([image, meta], L.Dense(1)(L.Concatenate()([a, b])))
    batch = {"image": pixels, "meta": np.c_[rng.normal(size=16), rng.normal(size=16) * 1e6]}
    findings = lint_inputs(batch, model)
    assert [(f.where, f.code) for f in findings] == [("input 'meta'", "feature_scale_spread")]


class Subclassed(keras.Model):
    def __init__(self, rescale):
        super().__init__()
        self.rescale = L.Rescaling(1 / 255) if rescale else None
        self.flat = L.Flatten()
        self.out = L.Dense(2)

    def call(self, x):
        if self.rescale is not None:
            x = self.rescale(x)
        return self.out(self.flat(x))


def test_subclassed_models(pixels):
    assert lint_inputs(pixels, Subclassed(rescale=True)) == []
    (f,) = lint_inputs(pixels, Subclassed(rescale=False))
    assert f.code == "raw_pixels" and "subclassed" in f.message


def test_without_model_the_data_is_judged_alone(pixels):
    (f,) = lint_inputs(pixels)
    assert f.code == "raw_pixels" and "no model given" in f.message


def test_bad_arguments_raise(pixels):
    with pytest.raises(ContractError, match="max_std_ratio"):
        lint_inputs(pixels, max_std_ratio=0)
    with pytest.raises(ContractError, match="keras.Model"):
        lint_inputs(pixels, model="model")
    assert lint_inputs(np.array(["a", "b"])) == []
