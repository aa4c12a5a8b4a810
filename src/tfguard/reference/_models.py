"""Reference models: the small CNN and an MLP, compiled and ready to fit.

The models take the *preprocessed* `float32` inputs in [0, 1] (see
`tfguard.reference.preprocess`) and end in a softmax, trained with sparse
categorical cross-entropy. Layer names are fixed (`conv1`, `dense1`,
`output`, ...) so logs, guards and diagnoses name the same layer in every
run.

Example:

>>> from tfguard.reference import build_model
>>> model = build_model("cnn", (28, 28, 1), 10)
>>> [layer.name for layer in model.layers][1:]
['conv1', 'pool1', 'conv2', 'pool2', 'flatten', 'dense1', 'dropout', 'output']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import keras

from tfguard._errors import ContractError

OPTIMIZERS = {
    "adam": keras.optimizers.Adam,
    "adamw": keras.optimizers.AdamW,
    "sgd": keras.optimizers.SGD,
    "rmsprop": keras.optimizers.RMSprop,
}


def cnn(input_shape: Sequence[int] = (28, 28, 1), num_classes: int = 10) -> keras.Model:
    """The reference CNN.

    Input → Conv2D(32, 3×3, relu) → MaxPool → Conv2D(64, 3×3, relu) → MaxPool
    → Flatten → Dense(128, relu) → Dropout(0.3) → Dense(num_classes, softmax).

    Args:
        input_shape: `(height, width, channels)`. Defaults to `(28, 28, 1)`.
        num_classes: outputs of the softmax. Defaults to `10`.

    Returns:
        An uncompiled functional `keras.Model` named `"cnn"`.
    """
    inputs = keras.Input(tuple(input_shape), name="image")
    x = keras.layers.Conv2D(32, (3, 3), activation="relu", name="conv1")(inputs)
    x = keras.layers.MaxPooling2D(name="pool1")(x)
    x = keras.layers.Conv2D(64, (3, 3), activation="relu", name="conv2")(x)
    x = keras.layers.MaxPooling2D(name="pool2")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Dense(128, activation="relu", name="dense1")(x)
    x = keras.layers.Dropout(0.3, name="dropout")(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax", name="output")(x)
    return keras.Model(inputs, outputs, name="cnn")


def mlp(input_shape: Sequence[int] = (28, 28, 1), num_classes: int = 10) -> keras.Model:
    """A small MLP: Flatten → Dense(128, relu) → Dropout(0.3) → Dense(num_classes, softmax).

    Args:
        input_shape: the shape of one example. Defaults to `(28, 28, 1)`.
        num_classes: outputs of the softmax. Defaults to `10`.

    Returns:
        An uncompiled functional `keras.Model` named `"mlp"`.
    """
    inputs = keras.Input(tuple(input_shape), name="image")
    x = keras.layers.Flatten(name="flatten")(inputs)
    x = keras.layers.Dense(128, activation="relu", name="dense1")(x)
    x = keras.layers.Dropout(0.3, name="dropout")(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax", name="output")(x)
    return keras.Model(inputs, outputs, name="mlp")


MODELS: dict[str, Callable[..., keras.Model]] = {"cnn": cnn, "mlp": mlp}


def make_optimizer(name: str = "adam", learning_rate: float = 1e-3) -> keras.optimizers.Optimizer:
    """Builds an optimizer by name.

    Args:
        name: one of `"adam"`, `"adamw"`, `"sgd"`, `"rmsprop"`. Defaults to `"adam"`.
        learning_rate: a positive float. Defaults to `1e-3`.

    Returns:
        A `keras.optimizers.Optimizer`.

    Raises:
        ContractError: unknown name or non-positive learning rate.
    """
    if name not in OPTIMIZERS:
        raise ContractError(
            f"Received an invalid value for `optimizer`, expected one of {sorted(OPTIMIZERS)}. "
            f"Received: optimizer={name!r}"
        )
    if (
        isinstance(learning_rate, bool)
        or not isinstance(learning_rate, (int, float))
        or not (learning_rate > 0)
    ):
        raise ContractError(
            "Received an invalid value for `learning_rate`, expected a positive float. "
            f"Received: learning_rate={learning_rate!r}"
        )
    return OPTIMIZERS[name](learning_rate=float(learning_rate))


def build_model(
    name: str = "cnn",
    input_shape: Sequence[int] = (28, 28, 1),
    num_classes: int = 10,
    *,
    optimizer: str = "adam",
    learning_rate: float = 1e-3,
    jit_compile: bool | str = "auto",
) -> keras.Model:
    """Builds and compiles a reference model.

    Compiled with the optimizer, `sparse_categorical_crossentropy` and
    `accuracy`. With `jit_compile="auto"` Keras uses XLA on a GPU, where
    `tf.debugging` asserts compile to nothing (see `tfguard doctor`).

    Args:
        name: `"cnn"` or `"mlp"`. Defaults to `"cnn"`.
        input_shape: shape of one preprocessed example. Defaults to `(28, 28, 1)`.
        num_classes: number of classes. Defaults to `10`.
        optimizer: optimizer name, see `make_optimizer`. Defaults to `"adam"`.
        learning_rate: a positive float. Defaults to `1e-3`.
        jit_compile: passed to `model.compile`. Defaults to `"auto"`.

    Returns:
        A compiled `keras.Model`.

    Raises:
        ContractError: unknown model or optimizer, or invalid sizes.
    """
    if name not in MODELS:
        raise ContractError(
            f"Received an invalid value for `model`, expected one of {sorted(MODELS)}. "
            f"Received: model={name!r}"
        )
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ContractError(
            "Received an invalid value for `num_classes`, expected an integer >= 2. "
            f"Received: num_classes={num_classes!r}"
        )
    shape = tuple(input_shape)
    if not shape or any(not isinstance(d, int) or d <= 0 for d in shape):
        raise ContractError(
            "Received an invalid value for `input_shape`, expected positive integers. "
            f"Received: input_shape={shape}"
        )
    if name == "cnn" and (len(shape) != 3 or min(shape[:2]) < 10):
        raise ContractError(
            "Received an invalid value for `input_shape` for the CNN, expected "
            f"(height, width, channels) with height and width >= 10. Received: input_shape={shape}",
            hint="use --model mlp for non-image data.",
        )
    model = MODELS[name](shape, num_classes)
    model.compile(
        optimizer=make_optimizer(optimizer, learning_rate),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    return model
