"""The one vocabulary of losses: kinds, Keras's names for them, and the loss/activation rules.

Long because: the rule table is keyed by the kinds and activation families defined here, and
each of its rows is data that carries its own message and fix; one contract, read in one place.

Whether an output layer fits its loss depends on what the loss expects of
the output: its *kind*. Lint reads a live model (`tfguard.lint._losses`
turns any Keras loss object into its canonical name), the diagnosis reads the
model description the Logger wrote (`tfguard.lint.describe_model`); both take
the kind from this module and judge the output with `output_mismatches`, so a
model gets the same codes and severities from `tfguard lint` and from the
diagnosis of its run. Pure Python: the offline diagnosis imports it.

Kinds (`KINDS`):

- `"categorical"`: categorical (focal) cross-entropy, one-hot label rows.
- `"sparse_categorical"`: sparse categorical cross-entropy, integer class ids.
- `"binary"`: binary (focal) cross-entropy, a probability per output unit.
- `"auto_crossentropy"`: the string `"crossentropy"` / `"ce"`, which Keras
  resolves at fit time: binary over one output unit, else (sparse)
  categorical from the labels' shape (`resolved_kind`).
- `"divergence"`: KL divergence, probability distributions (no `from_logits`).
- `"regression"`: MSE, MAE, MAPE, MSLE, Huber, log-cosh.
- `"hinge"`: hinge, squared hinge: labels -1/+1 (Keras maps 0/1 onto them),
  the sign of the output decides.
- `"categorical_hinge"`: categorical hinge, one-hot labels, a score per class.
- `"unknown"`: a loss tfguard does not know (a custom loss): no rule applies.
- `"none"`: no loss (an uncompiled model).

The loss/activation rule table (`MISMATCH_RULES`; every finding has the
symptom id `loss_activation_mismatch` and the code in `evidence["code"]`).
An error is a model that cannot learn or whose loss is meaningless; a warning
one that trains but computes a weaker or wrong loss, or whose `predict()`
returns something other than what the loss optimized:

| code | severity | loss | output |
|---|---|---|---|
| `softmax_single_unit` | error | any | softmax over 1 unit: always 1.0, no gradient |
| `categorical_loss_single_unit` | error | (sparse) categorical | 1 unit: the loss is constant |
| `softmax_with_from_logits` | warning | cross-entropy, from_logits=True | softmax: applied twice |
| `sigmoid_with_from_logits` | warning | cross-entropy, from_logits=True | sigmoid: applied twice |
| `relu_logits` | warning | cross-entropy, from_logits=True | ReLU family: logits cannot go below 0 |
| `bounded_logits` | warning | cross-entropy, from_logits=True | tanh-like: logits in (-1, 1) |
| `logits_without_from_logits` | error | cross-entropy on probabilities, KL | linear, log_softmax |
| `relu_output_into_probability_loss` | error | cross-entropy on probabilities, KL | ReLU family |
| `tanh_output_into_probability_loss` | error | cross-entropy on probabilities, KL | tanh-like |
| `sigmoid_with_categorical_crossentropy` | warning | (sparse) categorical on probabilities | several sigmoids |
| `softmax_with_binary_crossentropy` | warning | binary | softmax over several units |
| `regression_loss_on_classifier` | info | regression | softmax over several units |
| `nonnegative_output_into_hinge` | warning | hinge, squared hinge | softmax, sigmoid, ReLU |

Why these severities (TF 2.21 / Keras 3.15): a ReLU output read as
probabilities gives a NaN loss when a row of a categorical cross-entropy is
all zeros (Keras divides by the row's sum) and zero gradients where it is
clipped; on sklearn's digits it ends at chance (11 %). Logits read as
probabilities are clipped into [1e-7, 1 - 1e-7]: 20-77 % instead of 96 %.
A softmax into a `from_logits=True` loss still trains (Keras's TensorFlow
backend even notices the softmax and uses its input) but computes a wrong
loss on other backends: a warning. Under hinge (even/odd digits, 5 epochs) a
linear output reaches loss 0.10 and 97 % by sign; a sigmoid keeps a floor of
0.58 and 50 % by sign (93 % thresholded at 0.5), a ReLU died on 1 seed of 4:
a warning. An activation read from the last layer of an unbuilt subclassed
model is a guess: its errors become warnings.

Example:

>>> kind_of("SparseCategoricalCrossentropy"), kind_of("mse"), kind_of("my_loss")
('sparse_categorical', 'regression', 'unknown')
>>> [(m.code, m.severity) for m in output_mismatches("categorical_crossentropy", "categorical",
...                                                   False, "relu", 10)]
[('relu_output_into_probability_loss', 'error')]
"""

from __future__ import annotations

import dataclasses

#: The loss kinds, each with what it expects of the output and the labels.
KINDS: dict[str, str] = {
    "categorical": "categorical (focal) cross-entropy: one-hot label rows, one class per example",
    "sparse_categorical": "sparse categorical cross-entropy: integer class ids",
    "binary": "binary (focal) cross-entropy: a probability per output unit, labels in [0, 1]",
    "auto_crossentropy": "the string 'crossentropy' or 'ce': binary over one unit, else (sparse) "
                         "categorical, as Keras resolves it at fit time",
    "divergence": "KL divergence: probability distributions, never logits",
    "regression": "MSE, MAE, MAPE, MSLE, Huber, log-cosh: real-valued targets",
    "hinge": "hinge, squared hinge: labels -1/+1 (0/1 mapped onto them), the sign decides",
    "categorical_hinge": "categorical hinge: one-hot labels, a score per class",
    "unknown": "a loss tfguard does not know (a custom loss): no rule applies to it",
    "none": "no loss (an uncompiled model)",
}

#: Kinds whose loss reads probabilities unless `from_logits=True`.
CROSSENTROPY_KINDS = ("categorical", "sparse_categorical", "binary", "auto_crossentropy")

#: The strings Keras resolves to a cross-entropy at fit time (`"auto_crossentropy"`).
AUTO_CROSSENTROPY = ("crossentropy", "ce")


@dataclasses.dataclass(frozen=True)
class KerasLoss:
    """A loss Keras ships.

    Args:
        name: its function name (`"categorical_crossentropy"`), the canonical name.
        cls: its class name in `keras.losses` (`"CategoricalCrossentropy"`).
        kind: one of `KINDS`.
        logits_only: a TensorFlow function that always reads logits
            (`tf.nn.softmax_cross_entropy_with_logits`) and computes this loss.
            Defaults to `False`.
    """

    name: str
    cls: str
    kind: str
    logits_only: bool = False


_KERAS_LOSSES = (
    KerasLoss("categorical_crossentropy", "CategoricalCrossentropy", "categorical"),
    KerasLoss("categorical_focal_crossentropy", "CategoricalFocalCrossentropy", "categorical"),
    KerasLoss("sparse_categorical_crossentropy", "SparseCategoricalCrossentropy", "sparse_categorical"),
    KerasLoss("binary_crossentropy", "BinaryCrossentropy", "binary"),
    KerasLoss("binary_focal_crossentropy", "BinaryFocalCrossentropy", "binary"),
    KerasLoss("kl_divergence", "KLDivergence", "divergence"),
    KerasLoss("mean_squared_error", "MeanSquaredError", "regression"),
    KerasLoss("mean_absolute_error", "MeanAbsoluteError", "regression"),
    KerasLoss("mean_absolute_percentage_error", "MeanAbsolutePercentageError", "regression"),
    KerasLoss("mean_squared_logarithmic_error", "MeanSquaredLogarithmicError", "regression"),
    KerasLoss("huber", "Huber", "regression"),
    KerasLoss("log_cosh", "LogCosh", "regression"),
    KerasLoss("hinge", "Hinge", "hinge"),
    KerasLoss("squared_hinge", "SquaredHinge", "hinge"),
    KerasLoss("categorical_hinge", "CategoricalHinge", "categorical_hinge"),
)

#: Other spellings Keras accepts (`keras.losses.get`), by the function they stand for.
_ALIASES = {
    "bce": "binary_crossentropy",
    "kld": "kl_divergence",
    "kullback_leibler_divergence": "kl_divergence",
    "mse": "mean_squared_error",
    "mae": "mean_absolute_error",
    "mape": "mean_absolute_percentage_error",
    "msle": "mean_squared_logarithmic_error",
    "huber_loss": "huber",
}

#: TensorFlow's losses people pass to `compile()`, which always read logits.
_TF_LOGITS_LOSSES = {
    "softmax_cross_entropy_with_logits": "categorical_crossentropy",
    "sparse_softmax_cross_entropy_with_logits": "sparse_categorical_crossentropy",
    "sigmoid_cross_entropy_with_logits": "binary_crossentropy",
}


def _spelling(name: str) -> str:
    """`"SparseCategoricalCrossentropy"` and `"sparse_categorical_crossentropy"` alike."""
    return name.lower().replace("_", "")


def _index() -> dict[str, KerasLoss]:
    by_name = {loss.name: loss for loss in _KERAS_LOSSES}
    index = {}
    for loss in _KERAS_LOSSES:
        index[_spelling(loss.name)] = loss
        index[_spelling(loss.cls)] = loss
    for alias, name in _ALIASES.items():
        index[_spelling(alias)] = by_name[name]
    for tf_name, name in _TF_LOGITS_LOSSES.items():
        for suffix in ("", "_v2"):
            index[_spelling(tf_name + suffix)] = dataclasses.replace(by_name[name], logits_only=True)
    return index


_BY_SPELLING = _index()


def keras_loss(name: str | None) -> KerasLoss | None:
    """The Keras loss a name stands for, in any spelling, or `None` for a name it does not know.

    Example:

    >>> keras_loss("KLD").name, keras_loss("sparse_softmax_cross_entropy_with_logits").logits_only
    ('kl_divergence', True)
    """
    if not name:
        return None
    return _BY_SPELLING.get(_spelling(str(name)))


def keras_function(name: str | None) -> KerasLoss | None:
    """The Keras loss a Python function's `__name__` names, or `None`.

    Only Keras's own function names and TensorFlow's logits losses count: a
    function of the user's that is called like an alias (`mse`, `ce`) may
    compute anything (a cross-entropy on logits, say).

    Example:

    >>> keras_function("mean_squared_error").kind, keras_function("mse"), keras_function("ce")
    ('regression', None, None)
    """
    known = keras_loss(name)
    if known is None or known.logits_only or known.name == name:
        return known
    return None


def kind_of(name: str | None) -> str:
    """The kind of a loss named by its function, class, alias or TensorFlow name.

    Args:
        name: e.g. `"sparse_categorical_crossentropy"`, `"BinaryCrossentropy"`,
            `"mse"`, `"crossentropy"`, or `None` for no loss.

    Returns:
        One of `KINDS`: `"none"` for `None`, `"unknown"` for a name not known.
    """
    if name is None:
        return "none"
    if str(name).lower() in AUTO_CROSSENTROPY:
        return "auto_crossentropy"
    known = keras_loss(name)
    return known.kind if known is not None else "unknown"


def resolved_kind(kind: str, units: int | None) -> str:
    """`"auto_crossentropy"` over one output unit is `"binary"`, as Keras resolves it; other kinds stay."""
    return "binary" if kind == "auto_crossentropy" and units == 1 else kind


@dataclasses.dataclass(frozen=True)
class DescribedLoss:
    """A loss as a model description records it (`tfguard.lint.describe_model`).

    Args:
        name: the canonical function name, or a custom loss's name; `None` without a loss.
        kind: one of `KINDS`.
        from_logits: the loss's `from_logits`, `None` where it has none or it is unknown.
    """

    name: str | None
    kind: str
    from_logits: bool | None


def described_loss(entry) -> DescribedLoss:
    """Reads the `"loss"` entry of a model description, old or new.

    A description written since the kind was recorded carries `"kind"`; an
    older one (or a hand-written string) is read from its `"name"`, then its
    `"class"`. A Keras loss comes back under its canonical function name.

    Example:

    >>> described_loss({"name": "binary_crossentropy", "class": "BinaryCrossentropy",
    ...                 "from_logits": True})
    DescribedLoss(name='binary_crossentropy', kind='binary', from_logits=True)
    >>> described_loss("mse").kind, described_loss(None).kind
    ('regression', 'none')

    Args:
        entry: `{"name", "class", "from_logits", "kind"}`, a loss name, or `None`.

    Returns:
        A `DescribedLoss`.
    """
    if not entry:
        return DescribedLoss(None, "none", None)
    if isinstance(entry, str):
        entry = {"name": entry}
    name, cls = entry.get("name"), entry.get("class")
    kind = entry.get("kind")
    if kind not in KINDS and cls == "function":  # a function is Keras's only by its own name
        known = keras_function(name)
        kind = known.kind if known is not None else "unknown"
    elif kind not in KINDS:
        kind = kind_of(name) if name else "none"
        if kind in ("none", "unknown") and cls:
            kind = kind_of(cls)
    known = keras_loss(name or cls)
    if known is not None and known.kind == kind:
        name = known.name  # an older description, or a hand-written one, may spell it otherwise
    from_logits = entry.get("from_logits")
    return DescribedLoss(name or cls, kind, from_logits if isinstance(from_logits, bool) else None)


# -- the loss/activation rule table ------------------------------------------------------------
#: Output activations, by the family a rule names (as `tfguard.lint._heads` spells them).
ACTIVATION_FAMILIES: dict[str, frozenset[str]] = {
    "softmax": frozenset({"softmax"}),
    "sigmoid": frozenset({"sigmoid", "hard_sigmoid"}),
    "logits": frozenset({"linear", "log_softmax"}),
    "bounded": frozenset({"tanh", "hard_tanh", "soft_sign", "softsign"}),
    "relu": frozenset({"relu", "relu6", "softplus", "exponential"}),
    "relu_variant": frozenset({"leaky_relu", "prelu", "elu", "selu", "celu", "gelu", "silu",
                               "swish", "hard_silu", "hard_swish", "mish"}),
}


def activation_family(activation: str | None) -> str | None:
    """The family of an output activation (`ACTIVATION_FAMILIES`), `"other"` for one not listed.

    Returns `None` for an activation that could not be read.
    """
    if activation is None:
        return None
    for family, names in ACTIVATION_FAMILIES.items():
        if activation in names:
            return family
    return "other"


@dataclasses.dataclass(frozen=True)
class MismatchRule:
    """One row of the loss/activation rule table.

    Args:
        code: the finding's `evidence["code"]`.
        severity: `"error"`, `"warning"` or `"info"`.
        kinds: the loss kinds the row judges (after `resolved_kind`); `None`
            for any loss, no loss included.
        reads: `"logits"` (a cross-entropy with `from_logits=True`),
            `"probabilities"` (a cross-entropy without it, or a divergence), or
            `None` for either.
        outputs: the output activation families (`ACTIVATION_FAMILIES`, or
            `"other"`) the row judges.
        units: `"one"` (a single output unit), `"several"` (not a single
            one; unknown counts as several), or `None` for any.
        what: what is wrong; a template of `{loss}`, `{act}`, `{units}`.
        fix: what to do; a template of the same, plus `{probabilities}` (the
            output that gives probabilities for this loss) and `{logits_loss}`
            (the loss that reads logits instead).
    """

    code: str
    severity: str
    kinds: frozenset[str] | None
    reads: str | None
    outputs: frozenset[str]
    units: str | None
    what: str
    fix: str

    def applies(self, kind: str, reads: str | None, family: str, units: int | None) -> bool:
        """Whether this row judges a `kind` loss reading `reads` on a `family` output of `units` units."""
        if self.kinds is not None and kind not in self.kinds:
            return False
        if self.reads is not None and reads != self.reads:
            return False
        if self.units == "one" and units != 1 or self.units == "several" and units == 1:
            return False
        return family in self.outputs


_CE = frozenset(CROSSENTROPY_KINDS)
_PROBABILITY_LOSSES = frozenset({*CROSSENTROPY_KINDS, "divergence"})
_MULTI_CLASS = frozenset({"categorical", "sparse_categorical", "auto_crossentropy"})
_RELU = frozenset({"relu", "relu_variant"})
_ANY_OUTPUT = frozenset({*ACTIVATION_FAMILIES, "other"})

#: The loss/activation rule table, in the order findings are reported.
MISMATCH_RULES: tuple[MismatchRule, ...] = (
    MismatchRule(
        "softmax_single_unit", "error", None, None, frozenset({"softmax"}), "one",
        "softmax over a single unit always outputs 1.0, so the loss gradient is zero and the "
        "model cannot learn",
        "For two classes use Dense(1, activation='sigmoid') with binary_crossentropy, or "
        "Dense(num_classes, activation='softmax') with (sparse_)categorical_crossentropy."),
    MismatchRule(
        "categorical_loss_single_unit", "error", frozenset({"categorical", "sparse_categorical"}),
        None, _ANY_OUTPUT - {"softmax"}, "one",
        "{loss} over a single output unit is constant (the softmax of one value is 1.0), so the "
        "loss gives no gradient",
        "Use Dense(num_classes) for several classes, or binary_crossentropy with "
        "Dense(1, activation='sigmoid') for two."),
    MismatchRule(
        "softmax_with_from_logits", "warning", _CE, "logits", frozenset({"softmax"}), "several",
        "the output already applies softmax but {loss} has from_logits=True; Keras's TensorFlow "
        "backend notices the softmax op and silently uses its input (with a UserWarning), but on "
        "the JAX or PyTorch backend, or with any op between the softmax and the loss, softmax is "
        "applied twice: the loss cannot approach 0 and gradients shrink",
        "Remove activation='softmax' from the last layer (keep from_logits=True), or set "
        "from_logits=False."),
    MismatchRule(
        "sigmoid_with_from_logits", "warning", _CE, "logits", frozenset({"sigmoid"}), None,
        "the output already applies sigmoid but {loss} has from_logits=True; Keras's TensorFlow "
        "backend notices the sigmoid op and silently uses its input, but on the JAX or PyTorch "
        "backend, or with any op between the sigmoid and the loss, sigmoid is applied twice and "
        "the loss sees probabilities squashed into [0.5, 0.73]",
        "Remove activation='sigmoid' from the last layer (keep from_logits=True), or set "
        "from_logits=False."),
    MismatchRule(
        "relu_logits", "warning", _CE, "logits", _RELU, None,
        "the output uses {act} and {loss} reads it as logits; logits that cannot go below 0 "
        "cannot push a wrong class down, and units that die stop learning",
        "Use a linear last layer (activation=None) with from_logits=True."),
    MismatchRule(
        "bounded_logits", "warning", _CE, "logits", frozenset({"bounded"}), None,
        "the output uses {act}, so the logits {loss} reads lie in (-1, 1); the predicted "
        "probabilities cannot get confident and the loss has a floor",
        "Use a linear last layer (activation=None) with from_logits=True."),
    MismatchRule(
        "logits_without_from_logits", "error", _PROBABILITY_LOSSES, "probabilities",
        frozenset({"logits"}), None,
        "the output is {act} (unbounded scores) but {loss} reads them as probabilities; Keras "
        "clips them to [1e-7, 1 - 1e-7], so most gradients are zero",
        "Use {logits_loss}, or {probabilities}."),
    MismatchRule(
        "relu_output_into_probability_loss", "error", _PROBABILITY_LOSSES, "probabilities", _RELU,
        None,
        "the output uses {act}, whose values are not probabilities, but {loss} reads them as "
        "probabilities: exact zeros are clipped (no gradient), and a row of zeros gives a NaN "
        "categorical loss",
        "Use {probabilities}, or a linear last layer with {logits_loss}."),
    MismatchRule(
        "tanh_output_into_probability_loss", "error", _PROBABILITY_LOSSES, "probabilities",
        frozenset({"bounded"}), None,
        "the output uses {act}, whose values reach -1, but {loss} reads them as probabilities",
        "Use {probabilities}, or a linear last layer with {logits_loss}."),
    MismatchRule(
        "sigmoid_with_categorical_crossentropy", "warning", _MULTI_CLASS, "probabilities",
        frozenset({"sigmoid"}), "several",
        "{units} independent sigmoid outputs feed {loss}, which expects one distribution over "
        "classes that sums to 1; Keras's TensorFlow backend trains it as a softmax over the "
        "sigmoid's inputs, so predict() returns sigmoids that are not the probabilities the loss "
        "optimized (other backends renormalize the sigmoids instead)",
        "One class per example: activation='softmax'. Several labels per example: keep sigmoid "
        "and use binary_crossentropy."),
    MismatchRule(
        "softmax_with_binary_crossentropy", "warning", frozenset({"binary"}), None,
        frozenset({"softmax"}), "several",
        "a softmax over {units} classes is scored by {loss} as {units} independent yes/no "
        "outputs; the metric 'accuracy' then becomes binary_accuracy and reads high even for a "
        "poor classifier",
        "One class per example: categorical_crossentropy (one-hot labels) or "
        "sparse_categorical_crossentropy (class ids). Several labels per example: "
        "activation='sigmoid'."),
    MismatchRule(
        "regression_loss_on_classifier", "info", frozenset({"regression"}), None,
        frozenset({"softmax"}), "several",
        "{loss} on softmax probabilities gives small gradients exactly when the model is "
        "confidently wrong; crossentropy is the loss matched to softmax",
        "Use categorical_crossentropy (one-hot labels) or sparse_categorical_crossentropy "
        "(class ids)."),
    MismatchRule(
        "nonnegative_output_into_hinge", "warning", frozenset({"hinge"}), None,
        frozenset({"softmax", "sigmoid", "relu"}), None,
        "the output uses {act}, which cannot go below 0, but {loss} scores the sign of the output "
        "against labels -1/+1 (Keras maps 0/1 onto them): a negative example's loss never falls "
        "below 1, so the loss keeps a floor and the output's sign does not tell the class",
        "Use a linear (activation=None) or tanh last layer with {loss}, or a sigmoid with "
        "binary_crossentropy."),
)


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """One loss/activation mismatch found on one output: a rule's row, rendered.

    Args:
        code: the rule's code.
        severity: the rule's severity (an error becomes a warning on a guessed activation).
        message: what is wrong, one sentence.
        suggestion: what to do.
    """

    code: str
    severity: str
    message: str
    suggestion: str


def _probability_output(kind: str) -> str:
    return "Dense(1, activation='sigmoid')" if kind == "binary" else "activation='softmax' on the last Dense"


def _logits_loss(kind: str, loss: str) -> str:
    if kind == "divergence":  # it has no from_logits: the cross-entropy on one-hot rows is the same loss
        return f"categorical_crossentropy(from_logits=True) instead of {loss}"
    return f"from_logits=True in {loss}"


def output_mismatches(loss: str | None, kind: str, from_logits: bool | None, activation: str | None,
                      units: int | None, activation_source: str | None = None) -> list[Mismatch]:
    """Judges one model output against its loss with `MISMATCH_RULES`.

    Example:

    >>> [m.code for m in output_mismatches("sparse_categorical_crossentropy", "sparse_categorical",
    ...                                    True, "softmax", 10)]
    ['softmax_with_from_logits']

    Args:
        loss: the loss's name, as the messages show it.
        kind: its kind (`KINDS`).
        from_logits: its `from_logits`; `None` reads as Keras's default, `False`.
        activation: the output activation as `tfguard.lint._heads` names it
            (`"linear"` for none), or `None` when it could not be read.
        units: the output's units (size of its last axis), `None` when unknown.
        activation_source: how the activation was read: `"layer"`, `"probe"`
            (from one forward pass), `"last_layer"` (a guess from an unbuilt
            model: its errors become warnings) or `None`. Defaults to `None`.

    Returns:
        The mismatches, in the table's order (empty for a matched output).
    """
    family = activation_family(activation)
    if family is None:
        return []
    kind = resolved_kind(kind, units)
    if kind in _CE:
        reads = "logits" if from_logits is True else "probabilities"
    else:
        reads = "probabilities" if kind == "divergence" else None
    shown = {"loss": loss or kind, "act": activation, "units": units if units is not None else "several",
             "probabilities": _probability_output(kind), "logits_loss": _logits_loss(kind, loss or kind)}
    found = []
    for rule in MISMATCH_RULES:
        if not rule.applies(kind, reads, family, units):
            continue
        message, severity = rule.what.format(**shown), rule.severity
        if activation_source == "last_layer":
            message += (" (activation read from the last layer the unbuilt model tracks; "
                        "build the model for a certain answer)")
            severity = "warning" if severity == "error" else severity
        elif activation_source == "probe":
            message += " (activation read from the values of one forward pass)"
        found.append(Mismatch(rule.code, severity, message[0].upper() + message[1:] + ".",
                              rule.fix.format(**shown)))
    return found


__all__ = ["ACTIVATION_FAMILIES", "AUTO_CROSSENTROPY", "CROSSENTROPY_KINDS", "KINDS",
           "MISMATCH_RULES", "DescribedLoss", "KerasLoss", "Mismatch", "MismatchRule",
           "activation_family", "described_loss", "keras_function", "keras_loss", "kind_of", "output_mismatches",
           "resolved_kind"]
