import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard.lint._model_lint import lint_model

L = keras.layers
CCE_LOGITS = keras.losses.CategoricalCrossentropy(from_logits=True)
SCCE_LOGITS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
BCE_LOGITS = keras.losses.BinaryCrossentropy(from_logits=True)


def dense(units, activation=None):
    return [L.Dense(8, activation="relu"), L.Dense(units, activation=activation)]


HEALTHY = [
    (dense(3, "softmax"), "sparse_categorical_crossentropy"),
    (dense(3, "softmax"), "categorical_crossentropy"),
    (dense(3), SCCE_LOGITS),
    (dense(3), CCE_LOGITS),
    (dense(3), functools.partial(keras.losses.categorical_crossentropy, from_logits=True)),
    (dense(3), tf.nn.softmax_cross_entropy_with_logits),
    ([*dense(3), L.Softmax()], "sparse_categorical_crossentropy"),
    (dense(1, "sigmoid"), "binary_crossentropy"),
    (dense(1, "sigmoid"), "crossentropy"),
    (dense(1), BCE_LOGITS),
    (dense(5, "sigmoid"), "binary_crossentropy"),  # multi-label
    (dense(3, "log_softmax"), SCCE_LOGITS),
    (dense(1), "mse"),
    (dense(1, "relu"), "mae"),
    (dense(1, "sigmoid"), "mse"),  # regression onto [0, 1] targets
    (dense(3, "softmax"), "kld"),
]


@pytest.mark.parametrize("layers, loss", HEALTHY)
def test_matched_heads_give_no_finding(seq, layers, loss):
    assert lint_model(seq(*layers), loss=loss) == []


BROKEN = [
    (dense(3, "softmax"), SCCE_LOGITS, "softmax_with_from_logits", "warning"),
    (dense(3, "softmax"), CCE_LOGITS, "softmax_with_from_logits", "warning"),
    ([*dense(3), L.Activation("softmax")], SCCE_LOGITS, "softmax_with_from_logits", "warning"),
    (dense(3), tf.nn.softmax_cross_entropy_with_logits, None, None),
    (dense(1, "sigmoid"), BCE_LOGITS, "sigmoid_with_from_logits", "warning"),
    (dense(3), "sparse_categorical_crossentropy", "logits_without_from_logits", "error"),
    (dense(1), "binary_crossentropy", "logits_without_from_logits", "error"),
    (
        dense(3, "log_softmax"),
        "sparse_categorical_crossentropy",
        "logits_without_from_logits",
        "error",
    ),
    (dense(3), "kld", "logits_without_from_logits", "error"),
    (dense(3, "relu"), "categorical_crossentropy", "relu_output_into_probability_loss", "error"),
    (dense(3, "tanh"), "categorical_crossentropy", "tanh_output_into_probability_loss", "error"),
    (dense(3, "relu"), SCCE_LOGITS, "relu_logits", "warning"),
    (dense(3, "tanh"), CCE_LOGITS, "bounded_logits", "warning"),
    (
        dense(4, "sigmoid"),
        "categorical_crossentropy",
        "sigmoid_with_categorical_crossentropy",
        "warning",
    ),
    (dense(4, "sigmoid"), "crossentropy", "sigmoid_with_categorical_crossentropy", "warning"),
    (dense(1, "softmax"), "binary_crossentropy", "softmax_single_unit", "error"),
    (dense(1, "softmax"), None, "softmax_single_unit", "error"),
    (dense(4, "softmax"), "binary_crossentropy", "softmax_with_binary_crossentropy", "warning"),
    (
        dense(1, "sigmoid"),
        "sparse_categorical_crossentropy",
        "categorical_loss_single_unit",
        "error",
    ),
    (dense(4, "softmax"), "mse", "regression_loss_on_classifier", "info"),
]


@pytest.mark.parametrize("layers, loss, code, severity", BROKEN)
def test_mismatches(seq, layers, loss, code, severity):
    findings = lint_model(seq(*layers), loss=loss)
    if code is None:
        assert findings == []
        return
    matching = [f for f in findings if f.code == code]
    assert matching, [f.code for f in findings]
    f = matching[0]
    assert f.id == "loss_activation_mismatch"
    assert f.severity == severity
    assert f.where.startswith("output '")
    assert f.suggestion
    assert f.evidence["units"] == seq(*layers).output_shape[-1]


def test_uses_compiled_loss_in_every_form(seq):
    for loss in (
        SCCE_LOGITS,
        "SparseCategoricalCrossentropy",
        keras.losses.categorical_crossentropy,
    ):
        model = seq(*dense(3))
        model.compile(optimizer="adam", loss=loss)
        expected = [] if loss is SCCE_LOGITS else ["logits_without_from_logits"]
        assert [f.code for f in lint_model(model)] == expected, loss


def test_explicit_loss_wins_over_compiled(seq):
    model = seq(*dense(3, "softmax"))
    model.compile(loss="sparse_categorical_crossentropy")
    assert lint_model(model) == []
    assert [f.code for f in lint_model(model, loss=SCCE_LOGITS)] == ["softmax_with_from_logits"]


def test_evidence_names_layer_and_loss(seq):
    model = seq(L.Dense(3, activation="softmax", name="head"))
    (f,) = lint_model(model, loss=SCCE_LOGITS)
    assert f.evidence == {
        "code": "softmax_with_from_logits",
        "output": f.evidence["output"],
        "layer": "head",
        "activation": "softmax",
        "activation_source": "layer",
        "units": 3,
        "loss": "sparse_categorical_crossentropy",
        "loss_class": "SparseCategoricalCrossentropy",
        "from_logits": True,
    }
    assert "layer 'head'" in f.where


def test_custom_loss_is_not_judged(seq):
    def focal_like(y_true, y_pred):
        return keras.ops.mean((y_true - y_pred) ** 2)

    assert lint_model(seq(*dense(3)), loss=focal_like) == []


def test_multi_output_pairs_each_head_with_its_loss():
    inp = keras.Input((4,))
    h = L.Dense(8, activation="relu")(inp)
    model = keras.Model(
        inp, [L.Dense(3, activation="softmax", name="cls")(h), L.Dense(1, name="score")(h)]
    )
    model.compile(loss=[SCCE_LOGITS, "binary_crossentropy"])
    findings = lint_model(model)
    assert sorted((f.evidence["output"], f.code) for f in findings) == [
        ("cls", "softmax_with_from_logits"),
        ("score", "logits_without_from_logits"),
    ]


class Subclassed(keras.Model):
    """Returns logits from call(): wrong for a loss that reads probabilities."""

    def __init__(self):
        super().__init__()
        self.hidden = L.Dense(8, activation="relu")
        self.out = L.Dense(3)

    def call(self, x):
        return self.out(self.hidden(x))


def test_subclassed_guess_is_downgraded_until_built():
    model = Subclassed()
    model.compile(loss="sparse_categorical_crossentropy")
    (guess,) = lint_model(model)
    assert (guess.code, guess.severity) == ("logits_without_from_logits", "warning")
    assert "unbuilt" in guess.message
    model(np.zeros((2, 4), "float32"))
    (probed,) = lint_model(model)
    assert (probed.code, probed.severity) == ("logits_without_from_logits", "error")
    assert probed.evidence["activation_source"] == "probe"


def _fit_accuracy(seq, digits, head, loss):
    """Trains a small MLP on 512 real digits for 5 epochs: (accuracy, final loss)."""
    x, y = digits
    x, y = x[:512] / 16.0, y[:512]
    keras.utils.set_random_seed(0)
    model = seq(L.Dense(32, activation="relu"), head, input_shape=(64,))
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss)
    history = model.fit(x, y, epochs=5, batch_size=64, verbose=0)
    accuracy = float(np.mean(np.argmax(model.predict(x, verbose=0), axis=-1) == y))
    return accuracy, history.history["loss"][-1]


def test_error_is_real_logits_read_as_probabilities_do_not_learn(seq, digits):
    """The error describes a real failure: the same model learns with the fix, not without."""
    head = L.Dense(10)
    assert [f.code for f in lint_model(seq(head), "sparse_categorical_crossentropy")] == [
        "logits_without_from_logits"
    ]
    broken_acc, broken_loss = _fit_accuracy(
        seq, digits, L.Dense(10), "sparse_categorical_crossentropy"
    )
    fixed_acc, fixed_loss = _fit_accuracy(seq, digits, L.Dense(10), SCCE_LOGITS)
    # The broken model's accuracy depends on the initialization (20-77 % measured);
    # its loss never gets near the matched model's.
    assert fixed_acc > 0.85 and fixed_acc - broken_acc > 0.15, (broken_acc, fixed_acc)
    assert broken_loss > 3 * fixed_loss, (broken_loss, fixed_loss)


def test_warning_not_error_tf_backend_repairs_double_softmax(seq, digits):
    """Why softmax_with_from_logits is a warning: Keras's TF backend uses the softmax input."""
    with pytest.warns(UserWarning, match="from_logits=True"):
        doubled, _ = _fit_accuracy(seq, digits, L.Dense(10, activation="softmax"), SCCE_LOGITS)
    matched, _ = _fit_accuracy(
        seq, digits, L.Dense(10, activation="softmax"), "sparse_categorical_crossentropy"
    )
    assert abs(doubled - matched) < 0.05, (doubled, matched)


def test_bad_arguments_raise(seq):
    with pytest.raises(ContractError, match="keras.Model"):
        lint_model("model.keras")
    with pytest.raises(ContractError, match="loss"):
        lint_model(seq(*dense(3)), loss=3)
