import json

import keras
import numpy as np
import pytest

from tfguard.lint._describe import describe_model

L = keras.layers


def test_compiled_sequential_round_trips_as_json(seq):
    model = seq(L.Dense(8, activation="relu"), L.Dense(3), L.Softmax())
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
    model.compile(
        optimizer=keras.optimizers.Adam(schedule),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    d = json.loads(json.dumps(describe_model(model)))
    assert d["class"] == "Sequential"
    assert d["input_shape"] == [None, 4]
    assert (d["output_units"], d["output_activation"]) == (3, "softmax")
    assert d["loss"] == {
        "name": "sparse_categorical_crossentropy",
        "class": "SparseCategoricalCrossentropy",
        "from_logits": True,
        "kind": "sparse_categorical",
    }
    assert d["optimizer"]["class"] == "Adam"
    assert abs(d["optimizer"]["learning_rate"] - 0.1) < 1e-6
    assert [(x["class"], x["activation"], x["units"], x["params"]) for x in d["layers"]] == [
        ("Dense", "relu", 8, 40),
        ("Dense", "linear", 3, 27),
        ("Softmax", "softmax", None, 0),
    ]


def test_uncompiled_functional_has_none_fields():
    inp = keras.Input((28, 28, 1))
    x = L.Conv2D(4, 3, activation="relu")(inp)
    out = L.Dense(10, activation="softmax")(L.Flatten()(x))
    d = describe_model(keras.Model(inp, out, name="cnn"))
    assert d["name"] == "cnn" and d["class"] == "Functional"
    assert d["input_shape"] == [None, 28, 28, 1]
    assert d["loss"] == {"name": None, "class": None, "from_logits": None, "kind": "none"}
    assert d["optimizer"] == {"class": None, "learning_rate": None, "momentum": None}
    assert d["layers"][0] == {
        "name": d["layers"][0]["name"],
        "class": "Conv2D",
        "activation": "relu",
        "units": 4,
        "params": 40,
        # glorot_uniform for a 3x3x1 -> 4 kernel: fan_in 9, fan_out 36
        "initializer": {"class": "GlorotUniform", "std": pytest.approx((2 / 45) ** 0.5),
                        "text": "GlorotUniform", "fan_in": 9},
    }
    assert d["inputs"][0]["use"] == "numeric"
    assert "outputs" not in d


class Classifier(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = L.Dense(6, activation="tanh")
        self.out = L.Dense(2, activation="sigmoid")

    def call(self, x):
        return self.out(self.hidden(x))


def test_subclassed_before_and_after_build():
    model = Classifier()
    model.compile(optimizer="sgd", loss="binary_crossentropy")
    before = describe_model(model)
    assert before["input_shape"] is None
    assert before["output_activation_source"] == "last_layer"
    assert [x["params"] for x in before["layers"]] == [None, None]
    model(np.zeros((3, 5), "float32"))
    after = describe_model(model)
    assert after["input_shape"] == [None, 5]
    assert (after["output_units"], after["output_activation"]) == (2, "sigmoid")
    assert after["output_activation_source"] == "probe"
    assert after["loss"]["name"] == "binary_crossentropy"
    assert [x["params"] for x in after["layers"]] == [36, 14]


def test_multi_output_lists_every_head_with_its_loss():
    inp = keras.Input((4,))
    h = L.Dense(8, activation="relu")(inp)
    model = keras.Model(
        inp,
        {"cls": L.Dense(3, activation="softmax", name="cls")(h), "reg": L.Dense(1, name="reg")(h)},
    )
    model.compile(loss={"cls": "sparse_categorical_crossentropy", "reg": "mse"})
    d = describe_model(model)
    by_name = {o["name"]: o for o in d["outputs"]}
    assert by_name["cls"]["activation"] == "softmax"
    assert by_name["cls"]["loss"]["name"] == "sparse_categorical_crossentropy"
    assert by_name["reg"]["loss"]["name"] == "mean_squared_error"
    assert by_name["reg"]["activation"] == "linear"


def test_nested_model_layers_are_flattened(seq):
    base = keras.Sequential([keras.Input((4,)), L.Dense(5, activation="relu", name="inner")])
    model = seq(base, L.Dense(2, name="top"))
    assert [x["name"] for x in describe_model(model)["layers"]] == ["inner", "top"]
