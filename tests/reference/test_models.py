import keras
import pytest

from tfguard._errors import ContractError
from tfguard.reference import build_model, make_optimizer


def test_reference_cnn_exactly():
    model = build_model("cnn", (28, 28, 1), 10)
    layers = model.layers[1:]
    spec = [(type(layer).__name__, layer.name, layer.get_config()) for layer in layers]
    assert [s[0] for s in spec] == [
        "Conv2D",
        "MaxPooling2D",
        "Conv2D",
        "MaxPooling2D",
        "Flatten",
        "Dense",
        "Dropout",
        "Dense",
    ]
    conv1, conv2 = spec[0][2], spec[2][2]
    assert (conv1["filters"], tuple(conv1["kernel_size"]), conv1["activation"]) == (
        32,
        (3, 3),
        "relu",
    )
    assert (conv2["filters"], tuple(conv2["kernel_size"]), conv2["activation"]) == (
        64,
        (3, 3),
        "relu",
    )
    assert (spec[5][2]["units"], spec[5][2]["activation"]) == (128, "relu")
    assert spec[6][2]["rate"] == 0.3
    assert (spec[7][2]["units"], spec[7][2]["activation"]) == (10, "softmax")
    assert model.input_shape == (None, 28, 28, 1) and model.output_shape == (None, 10)
    # 320 + 18,496 + 204,928 + 1,290
    assert model.count_params() == 225_034


def test_compiled_with_adam_sparse_ce_accuracy():
    model = build_model("cnn", (28, 28, 1), 10, learning_rate=0.002)
    assert isinstance(model.optimizer, keras.optimizers.Adam)
    assert float(model.optimizer.learning_rate) == pytest.approx(0.002)
    assert model.loss == "sparse_categorical_crossentropy"
    assert "accuracy" in str(model.get_compile_config()["metrics"])


def test_num_classes_and_mlp():
    assert build_model("cnn", (28, 28, 1), 3).output_shape == (None, 3)
    mlp = build_model("mlp", (6,), 4, optimizer="sgd")
    assert [type(layer).__name__ for layer in mlp.layers[1:]] == [
        "Flatten",
        "Dense",
        "Dropout",
        "Dense",
    ]
    assert mlp.output_shape == (None, 4) and isinstance(mlp.optimizer, keras.optimizers.SGD)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"name": "resnet"}, "expected one of \\['cnn', 'mlp'\\]. Received: model='resnet'"),
        ({"num_classes": 1}, "expected an integer >= 2. Received: num_classes=1"),
        ({"input_shape": (8, 8, 1)}, "height and width >= 10"),
        ({"input_shape": (0, 28, 1)}, "expected positive integers"),
        ({"optimizer": "lion"}, "Received: optimizer='lion'"),
        ({"learning_rate": 0}, "expected a positive float. Received: learning_rate=0"),
    ],
)
def test_errors(kwargs, match):
    args = {"name": "cnn", "input_shape": (28, 28, 1), "num_classes": 10, **kwargs}
    name = args.pop("name")
    with pytest.raises(ContractError, match=match):
        build_model(name, **args)


def test_make_optimizer():
    assert isinstance(make_optimizer("rmsprop", 0.1), keras.optimizers.RMSprop)
