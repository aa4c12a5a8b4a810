"""A data contract: named tensors, the checks each must pass, and shared shapes.

One contract serves three ways:

1. directly on tensors: `contract.check(x=..., y=...)` raises
   `tfguard.GuardViolation` in eager mode; inside a `tf.function` it fails the
   graph at run time with the same message (an `InvalidArgumentError`);
2. as a `tf.data` stage: `contract.apply(dataset, policy="raise" | "skip")`;
3. inside guarded training: `tfguard.guard(model, data=contract)`.

`evaluate` is the single source of truth: it returns flags and counts as
tensors and never raises, so it also holds under XLA.

Example:

>>> import tensorflow as tf
>>> from tfguard import checks
>>> contract = checks.Contract(x=[checks.finite(), checks.in_range(0, 1)],
...                            y=[checks.labels(10)],
...                            shapes={"x": ("B", 4), "y": ("B",)})
>>> contract.check(x=tf.fill([2, 4], 0.5), y=tf.constant([1, 9]))
>>> bad = [r.target for r in contract.failures(x=tf.fill([2, 4], 2.0), y=tf.constant([1, 9]))]
>>> bad
['x']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import keras
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard._losses import keras_function, kind_of
from tfguard.checks._base import Check, CheckResult
from tfguard.checks._labels import labels, probabilities
from tfguard.checks._shapes import Shapes, Spec
from tfguard.checks._values import finite, in_range
from tfguard.checks._verdict import graph_asserts, raise_if_failed

ROLES = ("x", "y", "sample_weight")


def leaves(role: str, value) -> list[tuple[str, tf.Tensor]]:
    """Flattens a (possibly nested) value into `(name, tensor)` pairs.

    A plain tensor keeps the role's name (`"x"`); nested leaves are named by
    their path (`"x/image"`, `"x/0"`). `None` leaves are dropped.

    Example:

    >>> import tensorflow as tf
    >>> [n for n, _ in leaves("x", {"image": tf.zeros([1]), "meta": tf.zeros([1])})]
    ['x/image', 'x/meta']
    """
    if value is None:
        return []
    paths = keras.tree.flatten_with_path(value)
    if len(paths) == 1 and paths[0][0] == ():
        return [(role, tf.convert_to_tensor(paths[0][1]))]
    return [
        (f"{role}/{'/'.join(str(p) for p in path)}", tf.convert_to_tensor(leaf))
        for path, leaf in paths
        if leaf is not None
    ]



def float_leaves(value) -> list[tf.Tensor]:
    """The floating-point tensors in a nested value.

    Example:

    >>> import tensorflow as tf
    >>> [t.dtype.name for t in float_leaves({"a": tf.zeros([1]), "b": tf.zeros([1], tf.int32)})]
    ['float32']
    """
    return [t for t in tf.nest.flatten(value) if isinstance(t, tf.Tensor) and t.dtype.is_floating]

class Contract:
    """What a batch must satisfy, checked as tensors.

    Args:
        x: checks applied to every input tensor (leaf). Defaults to `()`.
        y: checks applied to every target tensor. Defaults to `()`.
        sample_weight: checks applied to sample weights. Defaults to `()`.
        shapes: leaf name -> shape spec with shared symbolic names, e.g.
            `{"x": ("B", 28, 28, 1), "y": ("B",)}`. Defaults to `None`.
        name: shown in messages. Defaults to `"data contract"`.

    Raises:
        ContractError: when a check is not a `tfguard.checks` check.
    """

    def __init__(
        self,
        x: Iterable[Check] = (),
        y: Iterable[Check] = (),
        sample_weight: Iterable[Check] = (),
        shapes: Mapping[str, Spec] | None = None,
        name: str = "data contract",
    ):
        self.checks = {"x": tuple(x), "y": tuple(y), "sample_weight": tuple(sample_weight)}
        for role, items in self.checks.items():
            for item in items:
                if not isinstance(item, Check):
                    raise ContractError(
                        f"Received an invalid check for `{role}`, expected a tfguard.checks "
                        f"check such as checks.finite(). Received: {item!r}"
                    )
        self.shapes = Shapes(shapes) if shapes else None
        self.name = name

    def __repr__(self) -> str:
        parts = [f"{role}={list(items)}" for role, items in self.checks.items() if items]
        if self.shapes:
            parts.append(f"shapes={self.shapes.specs}")
        return f"Contract({', '.join(parts)})"

    def evaluate(self, x=None, y=None, sample_weight=None) -> list[CheckResult]:
        """Runs every check; returns results as tensors. Never raises for bad data.

        Example:

        >>> import tensorflow as tf
        >>> from tfguard import checks
        >>> rs = checks.Contract(x=[checks.finite()]).evaluate(x=tf.constant([float("nan")]))
        >>> bool(rs[0].ok)
        False
        """
        values = {"x": x, "y": y, "sample_weight": sample_weight}
        results: list[CheckResult] = []
        named: dict[str, tf.Tensor] = {}
        for role in ROLES:
            for leaf_name, tensor in leaves(role, values[role]):
                named[leaf_name] = tensor
                results.extend(check(tensor, leaf_name) for check in self.checks[role])
        if self.shapes is not None:
            results.extend(self.shapes(named))
        return results

    def checked(self, x=None, y=None, sample_weight=None) -> list[tuple[str, tf.Tensor, Check]]:
        """`(leaf name, tensor, check)` of every value check, in `evaluate`'s order (its shape checks follow).

        Example:

        >>> import tensorflow as tf
        >>> from tfguard import checks
        >>> [(name, check.name) for name, _, check in checks.Contract(x=[checks.finite()]).checked(
        ...     x={"a": tf.zeros([1]), "b": tf.zeros([1])})]
        [('x/a', 'finite'), ('x/b', 'finite')]
        """
        values = {"x": x, "y": y, "sample_weight": sample_weight}
        return [(name, tensor, check) for role in ROLES for name, tensor in leaves(role, values[role])
                for check in self.checks[role]]

    def flags(self, x=None, y=None, sample_weight=None) -> list[tuple[str, str, tf.Tensor]]:
        """The cheapest form: `(target, check name, ok)` per check, in `evaluate`'s order.

        Only the boolean is computed (no counts, no min/max): what the guarded
        step needs every step. Words for a failure come from `evaluate`.

        Example:

        >>> import tensorflow as tf
        >>> from tfguard import checks
        >>> [(t, c, bool(ok)) for t, c, ok in checks.Contract(x=[checks.finite()]).flags(
        ...     x=tf.constant([1.0]))]
        [('x', 'finite', True)]
        """
        values = {"x": x, "y": y, "sample_weight": sample_weight}
        flags: list[tuple[str, str, tf.Tensor]] = []
        named: dict[str, tf.Tensor] = {}
        for role in ROLES:
            for leaf_name, tensor in leaves(role, values[role]):
                named[leaf_name] = tensor
                flags.extend((leaf_name, c.name, c.flag(tensor)) for c in self.checks[role])
        if self.shapes is not None:
            flags.extend((r.target, r.check, r.ok) for r in self.shapes(named))
        return flags

    def failures(self, x=None, y=None, sample_weight=None) -> list[CheckResult]:
        """Evaluates eagerly and returns only the failed results."""
        return [r for r in self.evaluate(x, y, sample_weight) if not bool(r.ok)]

    def check(self, x=None, y=None, sample_weight=None, *, where: str = ""):
        """Raises `GuardViolation` when a check fails.

        In eager mode it raises directly. Inside a `tf.function` (not XLA) it
        returns an op that fails the graph at run time with the same message.

        Args:
            x: inputs. Defaults to `None`.
            y: targets. Defaults to `None`.
            sample_weight: sample weights. Defaults to `None`.
            where: extra context for the message, e.g. `"element 12"`. Defaults to `""`.

        Raises:
            GuardViolation: in eager mode, naming every failed tensor and check.
        """
        results = self.evaluate(x, y, sample_weight)
        return raise_if_failed(results, f"{self.name}{' at ' + where if where else ''}")

    def apply(self, dataset: tf.data.Dataset, policy: str = "raise") -> tf.data.Dataset:
        """Applies the contract as a `tf.data` stage.

        Elements are `x`, `(x,)`, `(x, y)` or `(x, y, sample_weight)`. With
        `policy="raise"`, iterating fails at the first bad element with an error
        naming the element's index and the failed checks; with `"skip"`, bad
        elements are dropped.

        Example:

        >>> import tensorflow as tf
        >>> from tfguard import checks
        >>> ds = tf.data.Dataset.from_tensor_slices(([0.5, 7.0, 0.2], [0, 1, 0]))
        >>> clean = checks.Contract(x=[checks.in_range(0, 1)]).apply(ds, policy="skip")
        >>> [round(float(x), 2) for x, _ in clean]
        [0.5, 0.2]

        Args:
            dataset: the dataset to guard.
            policy: `"raise"` or `"skip"`. Defaults to `"raise"`.

        Returns:
            The guarded dataset, with the same element structure.

        Raises:
            ContractError: for an unknown policy.
        """
        if policy not in ("raise", "skip"):
            raise ContractError(
                f"Received an invalid value for `policy`, expected 'raise' or 'skip'. "
                f"Received: policy={policy!r}"
            )

        def roles(element):
            if isinstance(element, tuple) and len(element) > 1:
                return dict(zip(ROLES, element))
            return {"x": element[0] if isinstance(element, tuple) else element}

        if policy == "skip":

            def keep(*element):
                results = self.evaluate(**roles(element))
                return tf.reduce_all(tf.stack([r.ok for r in results])) if results else True

            return dataset.filter(keep)

        def guarded(index, element):
            results = self.evaluate(**roles(element))
            asserts = graph_asserts(results, f"{self.name} at dataset element", index)
            with tf.control_dependencies(asserts):
                return tf.nest.map_structure(tf.identity, element)

        return dataset.enumerate().map(guarded, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def check(tensor, *checks: Check, name: str = "tensor"):
    """Runs checks on one tensor; raises `GuardViolation` on failure (see `Contract.check`).

    Example:

    >>> import tensorflow as tf
    >>> from tfguard import checks
    >>> checks.check(tf.constant([1.0, 2.0]), checks.finite(), name="logits")

    Args:
        tensor: the tensor to check.
        *checks: the checks to run.
        name: the tensor's name in messages. Defaults to `"tensor"`.

    Raises:
        GuardViolation: in eager mode, when a check fails.
    """
    tensor = tf.convert_to_tensor(tensor)
    return raise_if_failed([c(tensor, name) for c in checks], f"check of '{name}'")


def _loss_name(loss) -> str:
    if isinstance(loss, str):
        return loss
    if isinstance(loss, keras.losses.Loss):
        return getattr(loss, "fn", None).__name__ if hasattr(loss, "fn") else type(loss).__name__
    return getattr(loss, "__name__", type(loss).__name__)


def output_units(model: keras.Model) -> int | None:
    """The size of the last axis of the model's (first) output, when known."""
    try:
        outputs = model.outputs
    except (AttributeError, ValueError):
        outputs = None
    if outputs:
        return outputs[0].shape[-1]
    return None  # a subclassed model: its last *defined* layer need not be its output


def infer_contract(model: keras.Model) -> Contract:
    """The data contract implied by the compiled model (what `tfguard.guard(model, data="infer")` checks).

    Inputs must be finite; sample weights finite and >= 0; targets by the
    loss's kind (`tfguard._losses.kind_of`): sparse categorical crossentropy →
    class ids in `[0, units)`; categorical (focal) crossentropy → probability
    rows; binary (focal) crossentropy → values in [0, 1]; anything else → finite.

    Example:

    >>> import keras
    >>> m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    >>> m.compile(loss="sparse_categorical_crossentropy")
    >>> infer_contract(m)
    Contract(x=[Finite()], y=[Finite(), Labels()], sample_weight=[Finite(), in_range(0, None)])
    """
    loss = getattr(model, "loss", None)
    if loss is None or isinstance(loss, str):
        kind = kind_of(loss)
    else:  # an object or function is Keras's only by its function's own name
        known = keras_function(_loss_name(loss))
        kind = known.kind if known is not None else "unknown"
    y_checks: list = [finite()]
    units = output_units(model)
    if kind == "sparse_categorical":
        y_checks.append(labels(int(units)) if units else in_range(0, None))
    elif kind == "categorical":
        y_checks.append(probabilities())
    elif kind == "binary":
        y_checks.append(in_range(0, 1))
    return Contract(
        x=[finite()],
        y=y_checks,
        sample_weight=[finite(), in_range(0, None)],
        name="inferred data contract",
    )
