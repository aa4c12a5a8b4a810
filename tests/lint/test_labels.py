import keras
import numpy as np
import pytest
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard.lint._labels import lint_labels

L = keras.layers


@pytest.fixture
def softmax3(seq):
    return seq(L.Dense(3, activation="softmax"))


@pytest.fixture
def sigmoid1(seq):
    return seq(L.Dense(1, activation="sigmoid"))


@pytest.mark.parametrize(
    "loss, y",
    [
        ("sparse_categorical_crossentropy", np.array([0, 1, 2, 2])),
        ("sparse_categorical_crossentropy", np.array([[0], [2]])),
        ("sparse_categorical_crossentropy", tf.constant([0, 1, 2])),
        ("sparse_categorical_crossentropy", np.array([0.0, 1.0, 2.0])),
        ("categorical_crossentropy", np.eye(3)),
        ("categorical_crossentropy", np.array([[0.7, 0.2, 0.1]])),
        ("crossentropy", np.array([0, 2])),
        ("crossentropy", np.eye(3)),
        ("mse", np.array([[5.0, -3.0, 100.0]])),
    ],
)
def test_matched_labels_give_no_finding(softmax3, loss, y):
    assert lint_labels(y, softmax3, loss=loss) == []


@pytest.mark.parametrize(
    "loss, y, code",
    [
        ("sparse_categorical_crossentropy", np.array([0, 1, 3]), "class_id_out_of_range"),
        ("sparse_categorical_crossentropy", np.array([1, 2, 3]), "class_id_out_of_range"),
        ("sparse_categorical_crossentropy", np.array([-1, 0, 1]), "negative_class_id"),
        ("sparse_categorical_crossentropy", np.eye(3), "one_hot_to_sparse_loss"),
        ("sparse_categorical_crossentropy", np.array([[0.5, 0.5, 0.0]]), "label_width_mismatch"),
        ("sparse_categorical_crossentropy", np.array([0.5, 1.0]), "non_integer_class_ids"),
        ("categorical_crossentropy", np.array([0, 1, 2]), "class_ids_to_categorical_loss"),
        ("categorical_crossentropy", np.eye(4), "label_width_mismatch"),
        (
            "categorical_crossentropy",
            np.array([[1, 1, 0], [0, 1, 0]]),
            "multi_hot_to_categorical_loss",
        ),
        ("categorical_crossentropy", np.array([[0.2, 0.2, 0.2]]), "labels_not_distribution"),
        ("categorical_crossentropy", np.array([[2.0, -1.0, 0.0]]), "labels_outside_unit_interval"),
        ("crossentropy", np.array([0, 3]), "class_id_out_of_range"),
        ("crossentropy", np.eye(3) * 2, "labels_outside_unit_interval"),
    ],
)
def test_softmax_head_label_mistakes(softmax3, loss, y, code):
    findings = lint_labels(y, softmax3, loss=loss)
    assert [f.code for f in findings] == [code]
    (f,) = findings
    assert f.id == "label_range"
    assert f.severity == (
        "warning"
        if code in ("multi_hot_to_categorical_loss", "labels_not_distribution")
        else "error"
    )
    assert f.where.startswith("labels of output")
    assert f.suggestion


def test_out_of_range_evidence_counts_and_names_fix(softmax3):
    (f,) = lint_labels(np.array([0, 5, 5, 9, 1]), softmax3, loss="sparse_categorical_crossentropy")
    assert f.evidence["count"] == 3
    assert f.evidence["max"] == 9
    assert f.evidence["units"] == 3
    assert f.evidence["examples"] == [5, 9]
    assert "10 units" in f.suggestion


def test_ignore_class_is_allowed(softmax3):
    loss = keras.losses.SparseCategoricalCrossentropy(ignore_class=-1)
    assert lint_labels(np.array([0, -1, 2]), softmax3, loss=loss) == []
    assert [f.code for f in lint_labels(np.array([0, -2]), softmax3, loss=loss)] == [
        "negative_class_id"
    ]


@pytest.mark.parametrize(
    "y, codes",
    [
        (np.array([0, 1, 1, 0]), []),
        (np.array([[0.0], [1.0]]), []),
        (np.array([True, False]), []),
        (np.array([0, 1, 2, 9]), ["labels_outside_unit_interval"]),
        (np.array([-1, 1]), ["labels_outside_unit_interval"]),
    ],
)
def test_binary_labels(sigmoid1, y, codes):
    assert [f.code for f in lint_labels(y, sigmoid1, loss="binary_crossentropy")] == codes


def test_class_ids_to_binary_loss_hint(sigmoid1):
    (f,) = lint_labels(np.arange(10), sigmoid1, loss="binary_crossentropy")
    assert "class ids" in f.suggestion
    (g,) = lint_labels(np.array([-1.0, 1.0]), sigmoid1, loss="binary_crossentropy")
    assert "(y + 1) / 2" in g.suggestion


def test_multi_label_binary_width(seq):
    model = seq(L.Dense(4, activation="sigmoid"))
    assert lint_labels(np.array([[1, 0, 1, 1]]), model, loss="binary_crossentropy") == []
    codes = [f.code for f in lint_labels(np.array([0, 1]), model, loss="binary_crossentropy")]
    assert codes == ["label_width_mismatch"]


def test_nonfinite_labels(softmax3):
    (f,) = lint_labels(
        np.array([0.0, np.nan, np.inf]), softmax3, loss="sparse_categorical_crossentropy"
    )
    assert (f.id, f.code, f.evidence["count"]) == ("nonfinite", "nonfinite_labels", 2)


def test_uses_compiled_loss_and_skips_without_one(softmax3):
    y = np.array([0, 7])
    assert lint_labels(y, softmax3) == []
    softmax3.compile(loss="sparse_categorical_crossentropy")
    assert [f.code for f in lint_labels(y, softmax3)] == ["class_id_out_of_range"]


def test_sequence_labels(seq):
    model = seq(L.Dense(5, activation="softmax"), input_shape=(7, 4))
    y = np.random.default_rng(0).integers(0, 5, size=(2, 7))
    assert lint_labels(y, model, loss="sparse_categorical_crossentropy") == []
    y[0, 3] = 5
    assert [f.code for f in lint_labels(y, model, loss="sparse_categorical_crossentropy")] == [
        "class_id_out_of_range"
    ]


def test_multi_output_labels_by_name_and_order():
    inp = keras.Input((4,))
    h = L.Dense(8, activation="relu")(inp)
    model = keras.Model(
        inp,
        [
            L.Dense(3, activation="softmax", name="cls")(h),
            L.Dense(1, activation="sigmoid", name="flag")(h),
        ],
    )
    model.compile(loss=["sparse_categorical_crossentropy", "binary_crossentropy"])
    by_name = lint_labels({"cls": np.array([0, 4]), "flag": np.array([0, 1])}, model)
    assert [(f.evidence["output"], f.code) for f in by_name] == [("cls", "class_id_out_of_range")]
    by_order = lint_labels([np.array([0, 1]), np.array([0, 2])], model)
    assert [(f.evidence["output"], f.code) for f in by_order] == [
        ("flag", "labels_outside_unit_interval")
    ]
    with pytest.raises(ContractError, match="one label array per output"):
        lint_labels([np.array([0])], model)
    with pytest.raises(ContractError, match="output names"):
        lint_labels({"other": np.array([0])}, model)


def test_bad_labels_raise(softmax3):
    with pytest.raises(ContractError, match="rectangular"):
        lint_labels([[0, 1], [2]], softmax3, loss="sparse_categorical_crossentropy")
