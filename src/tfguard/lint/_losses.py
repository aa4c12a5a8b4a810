"""What a loss expects of the model output: `LossInfo` and `resolve_loss`.

Keras accepts a loss as a string (`"sparse_categorical_crossentropy"`,
`"mse"`, `"crossentropy"`), a function (`keras.losses.binary_crossentropy`,
a `functools.partial` of one, `tf.nn.softmax_cross_entropy_with_logits`), a
`keras.losses.Loss` object, a class, or a config dict. `resolve_loss` turns
all of them into one record: the canonical function name, the class, whether
it reads logits (`from_logits`) and its *kind*, which is what the lint rules
compare with the output activation.

The kind is one of `tfguard._losses.KINDS`, the vocabulary the diagnosis reads
from the model description too.

Example:

>>> import keras
>>> info = resolve_loss(keras.losses.CategoricalCrossentropy(from_logits=True))
>>> info.name, info.kind, info.from_logits
('categorical_crossentropy', 'categorical', True)
>>> resolve_loss("mse").kind
'regression'
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

import keras

from tfguard import _losses
from tfguard._errors import ContractError
from tfguard._hooks import keras_compat


@dataclasses.dataclass(frozen=True)
class LossInfo:
    """A loss, reduced to what a lint rule needs.

    Args:
        name: canonical function name (`"categorical_crossentropy"`), or the
            name the user gave a custom loss; `None` when there is no loss.
        cls: the class of the object given (`"CategoricalCrossentropy"`,
            `"function"`, `"str"`), or `None`.
        from_logits: whether the loss applies softmax/sigmoid itself; `None`
            when the loss has no such notion or it cannot be read.
        kind: one of `tfguard._losses.KINDS`.
        ignore_class: the label value a sparse loss skips. Defaults to `None`.
    """

    name: str | None
    cls: str | None
    from_logits: bool | None
    kind: str
    ignore_class: int | None = None

    def to_dict(self) -> dict:
        """Returns `{"name", "class", "from_logits", "kind"}` as written in a model description."""
        return {"name": self.name, "class": self.cls, "from_logits": self.from_logits,
                "kind": self.kind}


NO_LOSS = LossInfo(name=None, cls=None, from_logits=None, kind="none")


def _function_info(fn: Any, cls: str) -> LossInfo:
    keywords: dict = {}
    while isinstance(fn, functools.partial):
        keywords = {**fn.keywords, **keywords}
        fn = fn.func
    raw_name = getattr(fn, "__name__", None) or type(fn).__name__
    known = _losses.keras_function(raw_name)
    if known is not None and known.logits_only:
        return LossInfo(name=known.name, cls=cls, from_logits=True, kind=known.kind)
    kind = known.kind if known is not None else "unknown"
    from_logits = keywords.get("from_logits")
    if from_logits is None and kind in _losses.CROSSENTROPY_KINDS:
        try:
            param = inspect.signature(fn).parameters.get("from_logits")
        except (TypeError, ValueError):
            param = None
        if param is not None and param.default is not inspect.Parameter.empty:
            from_logits = param.default
    ignore_class = keywords.get("ignore_class")
    return LossInfo(
        name=raw_name,
        cls=cls,
        from_logits=None if from_logits is None else bool(from_logits),
        kind=kind,
        ignore_class=ignore_class,
    )


def resolve_loss(loss: Any) -> LossInfo:
    """Reads what a loss expects, whatever form it was given in.

    Args:
        loss: a string, function, `functools.partial`, `keras.losses.Loss`
            object or class, config dict, or `None`.

    Returns:
        A `LossInfo`. A loss tfguard does not know comes back with
        `kind="unknown"`; `None` comes back as `NO_LOSS`.

    Raises:
        TypeError: if `loss` is a list or dict of losses (resolve each output's
            loss on its own) or a non-callable object.
    """
    if loss is None:
        return NO_LOSS
    if isinstance(loss, (list, tuple)) or (isinstance(loss, dict) and "class_name" not in loss):
        raise ContractError(
            "Received an invalid value for `loss`, expected one loss (a string, function "
            f"or keras.losses.Loss). Received: loss of type {type(loss).__name__}"
        )
    if isinstance(loss, str):
        if loss.lower() in _losses.AUTO_CROSSENTROPY:
            return LossInfo(name=loss, cls="str", from_logits=False, kind="auto_crossentropy")
        try:
            obj = keras.losses.get(loss)
        except ValueError:
            obj = None
        if obj is None:
            return LossInfo(name=loss, cls="str", from_logits=None, kind="unknown")
        info = resolve_loss(obj)
        return dataclasses.replace(info, cls="str")
    if isinstance(loss, dict):
        return resolve_loss(keras.losses.get(loss))
    if inspect.isclass(loss):
        if issubclass(loss, keras.losses.Loss):
            return resolve_loss(loss())
        raise ContractError(
            "Received an invalid value for `loss`, expected a keras.losses.Loss subclass. "
            f"Received: loss={loss!r}"
        )
    if isinstance(loss, keras.losses.Loss) and callable(getattr(loss, "fn", None)):
        # A LossFunctionWrapper (every built-in loss class): a function plus kwargs.
        fn = loss.fn
        info = _function_info(fn, cls=type(loss).__name__)
        kwargs = keras_compat.loss_function_kwargs(loss)
        from_logits = kwargs.get("from_logits", info.from_logits)
        name = info.name
        if info.kind == "unknown" and type(loss).__name__ == "LossFunctionWrapper":
            name = loss.name or name
        return dataclasses.replace(
            info,
            name=name,
            from_logits=None if from_logits is None else bool(from_logits),
            ignore_class=kwargs.get("ignore_class", info.ignore_class),
        )
    if isinstance(loss, keras.losses.Loss):
        from_logits = getattr(loss, "from_logits", None)
        return LossInfo(
            name=getattr(loss, "name", None) or type(loss).__name__,
            cls=type(loss).__name__,
            from_logits=from_logits if isinstance(from_logits, bool) else None,
            kind="unknown",
        )
    if callable(loss):
        return _function_info(loss, cls="function")
    raise ContractError(
        "Received an invalid value for `loss`, expected a string, function or "
        f"keras.losses.Loss. Received: loss={loss!r} of type {type(loss).__name__}"
    )


def losses_per_output(loss: Any, output_names: list[str]) -> list[LossInfo]:
    """Resolves the loss of every model output, as `Model.compile` pairs them.

    Args:
        loss: one loss for all outputs, a list (one per output, in order), or a
            dict keyed by output name.
        output_names: the model's output names, in order.

    Returns:
        One `LossInfo` per output name (`NO_LOSS` where an output has none).

    Raises:
        ValueError: if a list of losses does not have one entry per output.
    """
    if isinstance(loss, dict) and "class_name" not in loss:
        return [resolve_loss(loss.get(name)) for name in output_names]
    if isinstance(loss, (list, tuple)):
        if len(loss) != len(output_names):
            raise ContractError(
                f"Received an invalid value for `loss`, expected one loss per output "
                f"({len(output_names)}: {output_names}). Received: {len(loss)} losses"
            )
        return [resolve_loss(item) for item in loss]
    info = resolve_loss(loss)
    return [info for _ in output_names]
