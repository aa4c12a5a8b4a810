import functools

import keras
import pytest
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard.lint._losses import NO_LOSS, losses_per_output, resolve_loss


@pytest.mark.parametrize(
    "loss, name, kind, from_logits",
    [
        (
            "sparse_categorical_crossentropy",
            "sparse_categorical_crossentropy",
            "sparse_categorical",
            False,
        ),
        ("categorical_crossentropy", "categorical_crossentropy", "categorical", False),
        ("bce", "binary_crossentropy", "binary", False),
        ("BinaryCrossentropy", "binary_crossentropy", "binary", False),
        ("mse", "mean_squared_error", "regression", None),
        ("crossentropy", "crossentropy", "auto_crossentropy", False),
        (keras.losses.binary_crossentropy, "binary_crossentropy", "binary", False),
        (
            keras.losses.CategoricalCrossentropy(from_logits=True),
            "categorical_crossentropy",
            "categorical",
            True,
        ),
        (
            keras.losses.SparseCategoricalCrossentropy(),
            "sparse_categorical_crossentropy",
            "sparse_categorical",
            False,
        ),
        (
            keras.losses.CategoricalFocalCrossentropy(from_logits=True),
            "categorical_focal_crossentropy",
            "categorical",
            True,
        ),
        (keras.losses.Huber, "huber", "regression", None),
        (keras.losses.KLDivergence(), "kl_divergence", "divergence", None),
        (
            functools.partial(keras.losses.categorical_crossentropy, from_logits=True),
            "categorical_crossentropy",
            "categorical",
            True,
        ),
        (
            tf.nn.sparse_softmax_cross_entropy_with_logits,
            "sparse_categorical_crossentropy",
            "sparse_categorical",
            True,
        ),
        (tf.nn.sigmoid_cross_entropy_with_logits, "binary_crossentropy", "binary", True),
        (
            {"class_name": "BinaryCrossentropy", "config": {"from_logits": True}},
            "binary_crossentropy",
            "binary",
            True,
        ),
    ],
)
def test_every_form_of_a_loss(loss, name, kind, from_logits):
    info = resolve_loss(loss)
    assert (info.name, info.kind, info.from_logits) == (name, kind, from_logits)


def test_custom_losses_are_unknown():
    def my_loss(y_true, y_pred):
        return keras.ops.mean(y_true - y_pred)

    class MyLoss(keras.losses.Loss):
        def call(self, y_true, y_pred):
            return y_true - y_pred

    assert resolve_loss(my_loss).kind == "unknown"
    assert resolve_loss(my_loss).name == "my_loss"
    assert resolve_loss(MyLoss(name="mine")).kind == "unknown"
    assert resolve_loss("no_such_loss").kind == "unknown"


def test_ignore_class_and_from_logits():
    info = resolve_loss(keras.losses.SparseCategoricalCrossentropy(ignore_class=-1))
    assert (info.ignore_class, info.from_logits) == (-1, False)
    assert resolve_loss(keras.losses.BinaryCrossentropy(from_logits=True)).from_logits is True
    assert (resolve_loss("kld").kind, resolve_loss("kld").from_logits) == ("divergence", None)
    assert resolve_loss("categorical_hinge").kind == "categorical_hinge"


def test_a_function_of_the_users_named_like_an_alias_is_not_judged():
    def ce(y_true, y_pred):  # may well read logits
        return keras.losses.categorical_crossentropy(y_true, y_pred, from_logits=True)

    def mse(y_true, y_pred):
        return keras.ops.mean((y_true - y_pred) ** 2)

    assert [(resolve_loss(f).name, resolve_loss(f).kind) for f in (ce, mse)] == [
        ("ce", "unknown"), ("mse", "unknown")]
    assert resolve_loss("ce").kind == "auto_crossentropy"  # the string is Keras's own


def test_none_and_bad_values():
    assert resolve_loss(None) is NO_LOSS
    with pytest.raises(ContractError, match="one loss"):
        resolve_loss(["mse", "mae"])
    with pytest.raises(ContractError, match="Received"):
        resolve_loss(3)
    with pytest.raises(ContractError, match="Loss subclass"):
        resolve_loss(int)


def test_losses_per_output():
    names = ["a", "b"]
    both = losses_per_output("mse", names)
    assert [i.kind for i in both] == ["regression", "regression"]
    listed = losses_per_output(["bce", "mse"], names)
    assert [i.kind for i in listed] == ["binary", "regression"]
    keyed = losses_per_output({"b": "bce"}, names)
    assert [i.kind for i in keyed] == ["none", "binary"]
    with pytest.raises(ContractError, match="one loss per output"):
        losses_per_output(["mse"], names)
