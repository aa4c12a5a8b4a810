"""`describe_model`: a JSON-able description of a Keras model and its compile state.

The logger writes this description as text (`tags.CONFIG_MODEL`) and the
diagnosis reads it back to know the output activation, the loss and which
layers are ReLU or sigmoid. It works for Sequential, functional and subclassed
models, compiled or not; a field that cannot be read is `None`.

Shape of the result::

    {"name", "class", "input_shape", "output_units", "output_activation",
     "loss": {"name", "class", "from_logits", "kind"},
     "optimizer": {"class", "learning_rate", "momentum"},
     "layers": [{"name", "class", "activation", "units", "params", "initializer"}],
     "inputs": [{"name", "dtype", "consumers": [{"name", "class"}], "use"}]}

Each input's `use` is what the model does with its values
(`tfguard.lint._lookup.input_uses`): `"lookup"` (ids: gathered, one-hot
encoded, looked up, at any depth of nesting), `"numeric"`, `"unused"` or
`None` when the model could not be traced. A subclassed model, whose
graph is only known by tracing, gets one entry per input with no name and
no consumers.

`output_activation_source` says how the activation was read (`"layer"`,
`"probe"`, `"last_layer"` or `None`, see `tfguard.lint._heads`).
`layers` lists the leaf layers (nested models are walked), in the order the
model tracks them. A model with several outputs also gets `"outputs"`, one
`{"name", "units", "activation", "activation_source", "loss"}` per output;
the top-level fields then describe the first output.

The loss's `name` is the canonical Keras function name
(`"sparse_categorical_crossentropy"`, whatever spelling or object was
compiled), or a custom loss's own name; its `kind` is one of
`tfguard._losses.KINDS`, so the diagnosis judges the output with the same
rule table as `tfguard lint` (`tfguard._losses.described_loss` also reads
descriptions written before `kind` was recorded).

Example:

>>> import keras
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
>>> model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
>>> d = describe_model(model)
>>> d["output_activation"], d["loss"]["from_logits"], d["optimizer"]["class"]
('softmax', False, 'Adam')
"""

from __future__ import annotations

import keras

from tfguard._hooks import keras_compat
from tfguard._hooks.keras_compat import optimizers_of
from tfguard._optimizer_state import learning_rate, unwrapped
from tfguard.lint._heads import input_shapes, layer_activation, output_heads
from tfguard.lint._lookup import input_uses
from tfguard.lint._losses import NO_LOSS, losses_per_output


def _shape(shape) -> list | None:
    return None if shape is None else [None if d is None else int(d) for d in shape]


def _units(layer) -> int | None:
    for attr in ("units", "filters", "output_dim"):
        value = getattr(layer, attr, None)
        if isinstance(value, int):
            return value
    return None


def _params(layer) -> int | None:
    if not layer.built:
        return None
    try:
        return int(layer.count_params())
    except ValueError:
        return None


def leaf_layers(model) -> list:
    """Returns the leaf layers of a model, walking nested models, in tracking order.

    Args:
        model: a Keras model.

    Returns:
        Every layer that is not itself a model, input layers excluded.
    """
    leaves = []
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            leaves.extend(leaf_layers(layer))
        elif type(layer).__name__ != "InputLayer":
            leaves.append(layer)
    return leaves


def _fan(layer) -> tuple[int | None, int | None]:
    """`(fan_in, fan_out)` of a layer's kernel (Dense, Conv*), or `(None, None)`."""
    kernel = getattr(layer, "kernel", None) if layer.built else None
    shape = getattr(kernel, "shape", None)
    if shape is None or len(shape) < 2:
        return None, None
    receptive = 1
    for d in shape[:-2]:
        receptive *= int(d)
    return int(shape[-2]) * receptive, int(shape[-1]) * receptive


def describe_initializer(layer) -> dict | None:
    """The kernel initializer of a layer: `{"class", "std", "text"}`, `None` without one.

    `std` is the standard deviation of the weights it draws for this
    layer's kernel (`RandomNormal(stddev)`, `TruncatedNormal` (0.88 of its
    stddev), `RandomUniform` ((max - min) / sqrt(12)), the VarianceScaling
    family (Glorot, He, LeCun) from the kernel's fans), `None` when unknown.

    Example:

    >>> import keras
    >>> d = keras.layers.Dense(4, kernel_initializer=keras.initializers.RandomNormal(stddev=3.0))
    >>> d.build((None, 8))
    >>> describe_initializer(d)["text"]
    'RandomNormal(stddev=3)'
    """
    init = getattr(layer, "kernel_initializer", None)
    if init is None or not hasattr(init, "get_config"):
        return None
    cls = type(init).__name__
    try:
        config = init.get_config()
    except (NotImplementedError, TypeError, ValueError):
        config = {}
    fan_in, fan_out = _fan(layer)
    std = None
    if cls == "RandomNormal":
        std = float(config.get("stddev", 0.05))
    elif cls == "TruncatedNormal":
        std = 0.8796 * float(config.get("stddev", 0.05))
    elif cls == "RandomUniform":
        std = (float(config.get("maxval", 0.05)) - float(config.get("minval", -0.05))) / 12 ** 0.5
    elif isinstance(getattr(init, "scale", None), (int, float)) and getattr(init, "mode", None) and fan_in:
        # the VarianceScaling family keeps its scale and mode as attributes (Glorot's config
        # holds only the seed)
        n = {"fan_in": fan_in, "fan_out": fan_out,
             "fan_avg": (fan_in + (fan_out or fan_in)) / 2}.get(init.mode, fan_in)
        std = (float(init.scale) / max(n, 1)) ** 0.5
    shown = {k: v for k, v in config.items() if k in ("stddev", "minval", "maxval", "scale")}
    text = cls + (f"({', '.join(f'{k}={v:g}' for k, v in shown.items())})"
                  if shown and cls in ("RandomNormal", "TruncatedNormal", "RandomUniform") else "")
    return {"class": cls, "std": std, "text": text, "fan_in": fan_in}


def describe_layer(layer) -> dict:
    """Describes one layer as `{"name", "class", "activation", "units", "params", "initializer"}`.

    Args:
        layer: a Keras layer.

    Returns:
        The description; `params` is `None` for an unbuilt layer.
    """
    return {
        "name": layer.name,
        "class": type(layer).__name__,
        "activation": layer_activation(layer),
        "units": _units(layer),
        "params": _params(layer),
        "initializer": describe_initializer(layer),
    }


def _flat_inputs(layer) -> list:
    """The KerasTensors a layer was first called on (empty when unknown)."""
    try:
        value = layer.input
    except (AttributeError, ValueError):
        return []
    return [t for t in keras.tree.flatten(value) if t is not None]


def describe_inputs(model) -> list[dict]:
    """Each input of a Sequential or functional model, with the layers that consume it first.

    `[{"name", "dtype", "consumers": [{"name", "class"}]}]`; a consumer that is
    a nested model is described by its own first consumers, and a layer that
    only moves, crops or perturbs the input (`PASS_THROUGH`: augmentation,
    resizing, reshaping, dropout) by the layers after it. Empty for a
    subclassed model (its graph is not known before it runs).

    Example:

    >>> import keras
    >>> x = keras.Input((4,), name="age")
    >>> m = keras.Model(x, keras.layers.Dense(1)(keras.layers.Normalization(name="norm")(x)))
    >>> describe_inputs(m)[0]["consumers"]
    [{'name': 'norm', 'class': 'Normalization'}]
    """
    try:
        inputs = list(model.inputs or [])
    except (AttributeError, ValueError):
        return []
    if not inputs:
        return []
    layers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]
    return [{"name": getattr(tensor, "name", None), "dtype": str(tensor.dtype),
             "consumers": _consumers(tensor, layers)} for tensor in inputs]


#: Layers that move, crop, resize or perturb their input without putting it on another scale:
#: the input is followed through them to the layer that computes with it (the transfer-learning
#: guide's augmentation layers before its `Rescaling`).
PASS_THROUGH = frozenset({
    "RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation", "RandomCrop", "RandomShear",
    "RandomContrast", "RandomBrightness", "RandomErasing", "RandomPerspective", "RandomElasticTransform",
    "RandomGaussianBlur", "RandomSharpness", "RandomPosterization", "RandomInvert", "RandomColorJitter",
    "RandomHue", "RandomSaturation", "RandomGrayscale", "AutoContrast", "Solarization", "AugMix",
    "RandAugment", "CutMix", "MixUp", "Resizing", "CenterCrop", "Cropping1D", "Cropping2D",
    "Cropping3D", "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D", "Reshape", "Permute", "Flatten",
    "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
    "GaussianDropout", "AlphaDropout", "Identity", "Masking",
})


def _passes_through(layer) -> bool:
    if type(layer).__name__ in PASS_THROUGH:
        return True
    inner = [sub for sub in getattr(layer, "layers", []) if type(sub).__name__ != "InputLayer"]
    return isinstance(layer, keras.Model) and bool(inner) and all(_passes_through(sub) for sub in inner)


def _consumers(tensor, layers: list, depth: int = 0) -> list[dict]:
    """The layers that first compute with `tensor`, through pass-through layers (`PASS_THROUGH`,
    or a nested model made of them only: an augmentation `Sequential`)."""
    found = []
    for layer in layers:
        if not any(t is tensor for t in _flat_inputs(layer)):
            continue
        if _passes_through(layer) and depth < 32:
            deeper = [c for out in keras_compat.call_outputs(layer, tensor) for c in _consumers(out, layers, depth + 1)]
            if deeper:
                found.extend(deeper)
                continue
        if isinstance(layer, keras.Model) and not _passes_through(layer):
            nested = [c for item in describe_inputs(layer) for c in item["consumers"]]
            found.extend(nested or [{"name": layer.name, "class": type(layer).__name__}])
        else:
            found.append({"name": layer.name, "class": type(layer).__name__})
    return found


def describe_optimizer(optimizer) -> dict:
    """Describes an optimizer as `{"class", "learning_rate", "momentum"}` (current values).

    Args:
        optimizer: a Keras optimizer or `None`.

    Returns:
        The description, with `None` fields for `None`. A learning-rate
        schedule is reported at the optimizer's current iteration.
    """
    if optimizer is None:
        return {"class": None, "learning_rate": None, "momentum": None}
    target = unwrapped(optimizer)  # a LossScaleOptimizer is described by its inner optimizer
    try:
        momentum = float(getattr(target, "momentum", None))
    except (TypeError, ValueError):
        momentum = None
    return {"class": type(target).__name__, "learning_rate": learning_rate(optimizer),
            "momentum": momentum}


def applying_optimizer(model):
    """The optimizer that applies the model's updates: `model.optimizer`, unless it never stepped
    while exactly one other optimizer the model holds did (a custom `train_step` with its own,
    beside the default `compile()` gave the model).

    Example:

    >>> import numpy as np
    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> m.compile()
    >>> m.own = keras.optimizers.SGD(0.5)
    >>> _ = m.own.apply_gradients([(np.ones((2, 1), "float32"), m.layers[0].kernel),
    ...                            (np.ones((1,), "float32"), m.layers[0].bias)])
    >>> type(applying_optimizer(m)).__name__
    'SGD'
    """
    main = getattr(model, "optimizer", None)

    def stepped(optimizer) -> bool:
        try:
            return int(keras.ops.convert_to_numpy(optimizer.iterations)) > 0
        except (AttributeError, TypeError, ValueError):
            return False

    if main is None or stepped(main):
        return main
    inner = {id(getattr(o, "inner_optimizer", None)) for o in optimizers_of(model)}
    others = [o for o in optimizers_of(model) if o is not main and id(o) not in inner and stepped(o)]
    return others[0] if len(others) == 1 else main


def _with_uses(model, inputs: list[dict]) -> list[dict]:
    """Adds each input's `use` (lookup / numeric) from tracing the model."""
    uses = input_uses(model)
    if uses is None:
        return [{**item, "use": None} for item in inputs]
    if not inputs:
        return [{"name": None, "dtype": None, "consumers": [], "use": use} for use in uses]
    if len(uses) != len(inputs):
        return [{**item, "use": None} for item in inputs]
    return [{**item, "use": use} for item, use in zip(inputs, uses)]


def describe_model(model) -> dict:
    """Describes a Keras model, its loss and optimizer as a JSON-able dict.

    Reading the output activation may call a built subclassed model once on a
    random batch (see `tfguard.lint._heads`); nothing else runs the model.

    Example:

    >>> import json, keras
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    >>> json.loads(json.dumps(describe_model(model)))["loss"]
    {'name': None, 'class': None, 'from_logits': None, 'kind': 'none'}

    Args:
        model: a Keras model (Sequential, functional or subclassed).

    Returns:
        The description documented in the module docstring.

    Raises:
        TypeError: if `model` is not a `keras.Model`.
    """
    heads = output_heads(model)
    compiled_loss = getattr(model, "loss", None) if getattr(model, "compiled", False) else None
    try:
        losses = losses_per_output(compiled_loss, [h.name for h in heads])
    except (TypeError, ValueError):
        losses = [NO_LOSS for _ in heads]
    shapes = input_shapes(model)
    if shapes is None:
        input_shape = None
    elif len(shapes) == 1:
        input_shape = _shape(shapes[0])
    else:
        input_shape = [_shape(s) for s in shapes]
    description = {
        "name": model.name,
        "class": type(model).__name__,
        "input_shape": input_shape,
        "output_units": heads[0].units,
        "output_activation": heads[0].activation,
        "output_activation_source": heads[0].source,
        "loss": losses[0].to_dict(),
        "optimizer": describe_optimizer(applying_optimizer(model)),
        "layers": [describe_layer(layer) for layer in leaf_layers(model)],
        "inputs": _with_uses(model, describe_inputs(model)),
    }
    if len(heads) > 1:
        description["outputs"] = [
            {
                "name": h.name,
                "units": h.units,
                "activation": h.activation,
                "activation_source": h.source,
                "loss": info.to_dict(),
            }
            for h, info in zip(heads, losses)
        ]
    return description
