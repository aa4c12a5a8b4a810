import keras
import pytest

from tfguard.lint._front import front_of_model

L = keras.layers


@pytest.mark.parametrize(
    "layers, kind, deciding",
    [
        ([L.Rescaling(1 / 255, name="d"), L.Dense(2)], "normalized", "d"),
        (
            [L.RandomFlip(name="f"), L.Normalization(mean=0.0, variance=1.0, name="d")],
            "normalized",
            "d",
        ),
        ([L.Reshape((4,)), L.BatchNormalization(name="d"), L.Dense(2)], "normalized", "d"),
        ([L.Dense(2, name="d"), L.BatchNormalization()], "raw", "d"),
        ([L.Dropout(0.1), L.Dense(2, name="d")], "raw", "d"),
        ([L.Embedding(10, 3, name="d"), L.Flatten()], "ids", "d"),
        ([L.Lambda(lambda t: t / 255.0, name="d"), L.Dense(2)], "unknown", "d"),
        ([L.Flatten(), L.Dropout(0.1)], "pass", None),
    ],
)
def test_sequential_front(seq, layers, kind, deciding):
    found, layer = front_of_model(seq(*layers))
    assert found == kind
    assert (layer.name if layer is not None else None) == deciding


def test_nested_model_front_is_walked(seq):
    preprocessing = keras.Sequential([keras.Input((4,)), L.Rescaling(0.5, name="half")])
    kind, layer = front_of_model(seq(preprocessing, L.Dense(2)))
    assert (kind, layer.name) == ("normalized", "half")


def test_functional_front_per_input():
    image = keras.Input((6, 6, 1), name="image")
    meta = keras.Input((2,), name="meta")
    a = L.Flatten()(L.Rescaling(1 / 255, name="scale")(L.RandomFlip()(image)))
    b = L.Dense(4, name="meta_dense")(meta)
    model = keras.Model([image, meta], L.Dense(1)(L.Concatenate()([a, b])))
    assert front_of_model(model, 0)[0] == "normalized"
    kind, layer = front_of_model(model, 1)
    assert (kind, layer.name) == ("raw", "meta_dense")


def test_functional_keras_ops_front_is_unknown():
    inp = keras.Input((4,))
    model = keras.Model(inp, L.Dense(2)(keras.ops.divide(inp, 255.0)))
    assert front_of_model(model)[0] == "unknown"


class Subclassed(keras.Model):
    def __init__(self, normalize):
        super().__init__()
        self.norm = L.LayerNormalization() if normalize else None
        self.out = L.Dense(2)

    def call(self, x):
        return self.out(self.norm(x) if self.norm is not None else x)


def test_subclassed_front():
    assert front_of_model(Subclassed(normalize=True))[0] == "normalized"
    assert front_of_model(Subclassed(normalize=False)) == ("subclassed", None)
