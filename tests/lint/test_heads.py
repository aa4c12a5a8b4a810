import keras
import numpy as np
import pytest
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard.lint._heads import activation_name, classify_values, output_heads

L = keras.layers


class TwoLayer(keras.Model):
    """A subclassed classifier whose softmax is applied inside call()."""

    def __init__(self, softmax=True):
        super().__init__()
        self.hidden = L.Dense(8, activation="relu")
        self.out = L.Dense(3)
        self.softmax = softmax

    def call(self, x):
        logits = self.out(self.hidden(x))
        return keras.ops.softmax(logits) if self.softmax else logits


@pytest.mark.parametrize(
    "fn, name",
    [
        (None, "linear"),
        ("softmax", "softmax"),
        (tf.nn.softmax, "softmax"),
        (tf.nn.relu, "relu"),
        (keras.activations.sigmoid, "sigmoid"),
        (lambda x: x, "lambda"),
    ],
)
def test_activation_name(fn, name):
    assert activation_name(fn) == name


def test_sequential_reads_through_dropout_to_softmax_layer(seq):
    model = seq(L.Dense(3), L.Softmax(name="probs"), L.Dropout(0.2))
    (head,) = output_heads(model)
    assert (head.units, head.activation, head.source, head.layer, head.rank) == (
        3,
        "softmax",
        "layer",
        "probs",
        2,
    )


def test_unbuilt_sequential_uses_layer_list():
    model = keras.Sequential([L.Dense(5), L.Dense(2, activation="sigmoid")])
    (head,) = output_heads(model)
    assert (head.units, head.activation, head.source) == (2, "sigmoid", "layer")


def test_functional_multi_output_with_ops_and_nested_model():
    inp = keras.Input((6,))
    hidden = L.Dense(8, activation="relu")(inp)
    nested = keras.Sequential([keras.Input((8,)), L.Dense(4), L.Activation("sigmoid")])
    a = nested(hidden)
    b = keras.ops.softmax(L.Dense(5)(hidden))
    c = L.Reshape((2,))(L.Dense(2, activation="tanh")(hidden))
    model = keras.Model(inp, [a, b, c])
    heads = output_heads(model)
    assert [(h.units, h.activation, h.source) for h in heads] == [
        (4, "sigmoid", "layer"),
        (5, "softmax", "layer"),
        (2, "tanh", "layer"),
    ]


def test_functional_inside_sequential(seq):
    inp = keras.Input((8,))
    inner = keras.Model(inp, L.Activation("sigmoid", name="gate")(L.Dense(2)(inp)))
    (head,) = output_heads(seq(L.Dense(8), inner))
    assert (head.units, head.activation, head.source, head.layer) == (2, "sigmoid", "layer", "gate")


def test_lambda_head_is_probed():
    inp = keras.Input((4,))
    out = L.Lambda(lambda t: keras.ops.sigmoid(t), name="squash")(L.Dense(3)(inp))
    (head,) = output_heads(keras.Model(inp, out))
    assert (head.activation, head.source) == ("sigmoid", "probe")


def test_subclassed_built_is_probed_unbuilt_is_a_guess():
    model = TwoLayer()
    (guess,) = output_heads(model)
    assert (guess.activation, guess.source, guess.units) == ("linear", "last_layer", 3)
    model(np.zeros((2, 4), "float32"))
    (head,) = output_heads(model)
    assert (head.activation, head.source, head.units) == ("softmax", "probe", 3)
    logits_model = TwoLayer(softmax=False)
    logits_model(np.zeros((2, 4), "float32"))
    assert output_heads(logits_model)[0].activation == "linear"


@pytest.mark.parametrize(
    "values, name",
    [
        ([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]], "softmax"),
        ([[0.2, 0.9, 0.5]], "sigmoid"),
        ([[0.0, 2.0, 0.5]], "relu"),
        ([[-1.0, 2.0, 0.5]], "linear"),
        ([[1.0], [1.0]], "softmax"),
        # saturated (raw inputs, huge weights: issue 22): exact zeros are not a ReLU's
        ([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], "softmax"),
        ([[0.0, 1.0, 0.3]], "sigmoid"),
        ([[0.0, 0.4, 0.7]], "relu"),
        ([[3.0, 2.0]], None),
        ([[np.nan, 1.0]], None),
    ],
)
def test_classify_values(values, name):
    assert classify_values(np.array(values)) == name


def test_not_a_model_raises():
    with pytest.raises(ContractError, match="keras.Model"):
        output_heads(L.Dense(3))
