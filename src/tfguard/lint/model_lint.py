"""`lint_model`: the output activation of every head against its loss.

These are the mistakes that make a Keras classifier train badly or not at all
while `fit()` runs without complaint:

| code | severity | what |
|---|---|---|
| `softmax_single_unit` | error | softmax over one unit is always 1.0: no gradient |
| `categorical_loss_single_unit` | error | categorical CE over one unit is always 0 |
| `softmax_with_from_logits` | warning | softmax output into a loss that applies softmax again |
| `sigmoid_with_from_logits` | warning | sigmoid output into a loss that applies sigmoid again |
| `logits_without_from_logits` | error | linear/log-softmax output read as probabilities (clipped to [1e-7, 1-1e-7]) |
| `relu_output_into_probability_loss` | error | ReLU-family output read as probabilities |
| `tanh_output_into_probability_loss` | error | tanh output (negative half) read as probabilities |
| `relu_logits` | warning | ReLU-family logits cannot go below 0 |
| `bounded_logits` | warning | tanh/sigmoid-bounded logits cap the confidence, the loss has a floor |
| `sigmoid_with_categorical_crossentropy` | warning | independent sigmoids into a loss for one class per example |
| `softmax_with_binary_crossentropy` | warning | one-of-N softmax scored as N independent yes/no; "accuracy" turns binary |
| `regression_loss_on_classifier` | info | MSE/MAE on softmax probabilities: weak gradients when confidently wrong |

Measured on sklearn's digits (5 epochs, Adam 0.01, 512 examples, TF 2.21 / Keras
3.15): a linear output into `sparse_categorical_crossentropy` without
`from_logits=True` ends at 20-77 % training accuracy (depending on the
initialization; its loss stays above 2.2) and a ReLU output at 11 %, against
96 % (loss 0.30) when matched; ReLU logits reach 58 %. A softmax output into a
`from_logits=True` loss trains as well as the matched pair *on the TensorFlow
backend*, because Keras's TF backend notices the softmax op in front of the
loss and silently uses its input (with a `UserWarning`); the JAX and PyTorch
backends do not, so both `*_with_from_logits` codes are warnings, not errors.
For the same reason a sigmoid into categorical crossentropy trains as a softmax
classifier on TF while `predict()` returns sigmoids that do not sum to 1.

Every finding has `id="loss_activation_mismatch"`. An activation read from the
last layer of an unbuilt subclassed model is a guess: its errors are reported
as warnings.

Example:

>>> import keras
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
>>> loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
>>> [f.code for f in lint_model(model, loss=loss)]
['softmax_with_from_logits']
"""

from __future__ import annotations

from typing import Any

from tfguard.lint.finding import LOSS_ACTIVATION_MISMATCH, LintFinding
from tfguard.lint.heads import OutputHead, output_heads
from tfguard.lint.losses import LossInfo, losses_per_output

SOFTMAX = frozenset({"softmax"})
SIGMOID = frozenset({"sigmoid", "hard_sigmoid"})
LOGITS = frozenset({"linear", "log_softmax"})
BOUNDED = frozenset({"tanh", "hard_tanh", "soft_sign", "softsign"})
RELU_FAMILY = frozenset(
    {
        "relu",
        "relu6",
        "leaky_relu",
        "prelu",
        "elu",
        "selu",
        "celu",
        "gelu",
        "silu",
        "swish",
        "hard_silu",
        "hard_swish",
        "mish",
        "softplus",
        "exponential",
    }
)

_CATEGORICAL = ("categorical", "sparse_categorical")


def _probability_fix(kind: str, units: int | None) -> str:
    if kind == "binary" or (kind == "auto_crossentropy" and units == 1):
        return "Dense(1, activation='sigmoid')"
    return "activation='softmax' on the last Dense"


def _mismatches(head: OutputHead, loss: LossInfo) -> list[tuple[str, str, str, str]]:
    """Returns (code, severity, message, suggestion) for one head and its loss."""
    act, units, kind = head.activation, head.units, loss.kind
    out: list[tuple[str, str, str, str]] = []
    if act in SOFTMAX and units == 1:
        out.append(
            (
                "softmax_single_unit",
                "error",
                "softmax over a single unit always outputs 1.0, so the loss gradient "
                "is zero and the model cannot learn",
                "For two classes use Dense(1, activation='sigmoid') with "
                "binary_crossentropy, or Dense(num_classes, activation='softmax') "
                "with (sparse_)categorical_crossentropy.",
            )
        )
    if kind in ("none", "unknown") or act is None:
        return out
    logits = loss.from_logits is True
    if kind in _CATEGORICAL and units == 1 and act not in SOFTMAX:
        out.append(
            (
                "categorical_loss_single_unit",
                "error",
                f"{loss.name} over a single output unit is constant (the softmax of one "
                "value is 1.0), so the loss gives no gradient",
                "Use Dense(num_classes) for several classes, or binary_crossentropy with "
                "Dense(1, activation='sigmoid') for two.",
            )
        )
    if logits and act in SOFTMAX and units != 1:
        out.append(
            (
                "softmax_with_from_logits",
                "warning",
                f"the output already applies softmax but {loss.name} has from_logits=True; "
                "Keras's TensorFlow backend notices the softmax op and silently uses its "
                "input (with a UserWarning), but on the JAX or PyTorch backend, or with any "
                "op between the softmax and the loss, softmax is applied twice: the loss "
                "cannot approach 0 and gradients shrink",
                "Remove activation='softmax' from the last layer (keep from_logits=True), "
                "or set from_logits=False.",
            )
        )
    elif logits and act in SIGMOID:
        out.append(
            (
                "sigmoid_with_from_logits",
                "warning",
                f"the output already applies sigmoid but {loss.name} has from_logits=True; "
                "Keras's TensorFlow backend notices the sigmoid op and silently uses its "
                "input, but on the JAX or PyTorch backend, or with any op between the "
                "sigmoid and the loss, sigmoid is applied twice and the loss sees "
                "probabilities squashed into [0.5, 0.73]",
                "Remove activation='sigmoid' from the last layer (keep from_logits=True), "
                "or set from_logits=False.",
            )
        )
    elif logits and act in RELU_FAMILY:
        out.append(
            (
                "relu_logits",
                "warning",
                f"the output uses {act} and {loss.name} reads it as logits; logits that "
                "cannot go below 0 cannot push a wrong class down, and units that die "
                "stop learning",
                "Use a linear last layer (activation=None) with from_logits=True.",
            )
        )
    elif logits and act in BOUNDED:
        out.append(
            (
                "bounded_logits",
                "warning",
                f"the output uses {act}, so the logits {loss.name} reads lie in (-1, 1); "
                "the predicted probabilities cannot get confident and the loss has a floor",
                "Use a linear last layer (activation=None) with from_logits=True.",
            )
        )
    if loss.reads_probabilities:
        fix = _probability_fix(kind, units)
        if act in LOGITS:
            out.append(
                (
                    "logits_without_from_logits",
                    "error",
                    f"the output is {act} (unbounded scores) but {loss.name} has "
                    "from_logits=False and reads them as probabilities; Keras clips them "
                    "to [1e-7, 1 - 1e-7], so most gradients are zero",
                    f"Pass from_logits=True to the loss, or use {fix}.",
                )
            )
        elif act in RELU_FAMILY:
            out.append(
                (
                    "relu_output_into_probability_loss",
                    "error",
                    f"the output uses {act}, whose values are not probabilities, but "
                    f"{loss.name} has from_logits=False and reads them as probabilities",
                    f"Use {fix}, or a linear last layer with from_logits=True.",
                )
            )
        elif act in BOUNDED:
            out.append(
                (
                    "tanh_output_into_probability_loss",
                    "error",
                    f"the output uses {act}, whose values reach -1, but {loss.name} has "
                    "from_logits=False and reads them as probabilities",
                    f"Use {fix}, or a linear last layer with from_logits=True.",
                )
            )
    multi_class = kind in _CATEGORICAL or (kind == "auto_crossentropy" and units != 1)
    if act in SIGMOID and multi_class and units != 1 and not logits:
        out.append(
            (
                "sigmoid_with_categorical_crossentropy",
                "warning",
                f"{units} independent sigmoid outputs feed {loss.name}, which expects one "
                "distribution over classes that sums to 1; Keras's TensorFlow backend "
                "trains it as a softmax over the sigmoid's inputs, so predict() returns "
                "sigmoids that are not the probabilities the loss optimized (other backends "
                "renormalize the sigmoids instead)",
                "One class per example: activation='softmax'. Several labels per "
                "example: keep sigmoid and use binary_crossentropy.",
            )
        )
    if act in SOFTMAX and kind == "binary" and units not in (None, 1):
        out.append(
            (
                "softmax_with_binary_crossentropy",
                "warning",
                f"a softmax over {units} classes is scored by binary_crossentropy as {units} "
                "independent yes/no outputs; the metric 'accuracy' then becomes "
                "binary_accuracy and reads high even for a poor classifier",
                "One class per example: categorical_crossentropy (one-hot labels) or "
                "sparse_categorical_crossentropy (class ids). Several labels per example: "
                "activation='sigmoid'.",
            )
        )
    if act in SOFTMAX and kind == "regression" and units not in (None, 1):
        out.append(
            (
                "regression_loss_on_classifier",
                "info",
                f"{loss.name} on softmax probabilities gives small gradients exactly when "
                "the model is confidently wrong; crossentropy is the loss matched to softmax",
                "Use categorical_crossentropy (one-hot labels) or "
                "sparse_categorical_crossentropy (class ids).",
            )
        )
    return out


def lint_head(head: OutputHead, loss: LossInfo) -> list[LintFinding]:
    """Checks one output head against its loss.

    Args:
        head: the output, from `tfguard.lint.heads.output_heads`.
        loss: its loss, from `tfguard.lint.losses.resolve_loss`.

    Returns:
        The findings, each with `id="loss_activation_mismatch"`.
    """
    findings = []
    where = f"output '{head.name}'" + (f" (layer '{head.layer}')" if head.layer else "")
    for code, severity, message, suggestion in _mismatches(head, loss):
        if head.source == "last_layer":
            message += (
                " (activation read from the last layer the unbuilt model tracks; "
                "build the model for a certain answer)"
            )
            severity = "warning" if severity == "error" else severity
        elif head.source == "probe":
            message += " (activation read from the values of one forward pass)"
        findings.append(
            LintFinding(
                id=LOSS_ACTIVATION_MISMATCH,
                severity=severity,
                message=message[0].upper() + message[1:] + ".",
                where=where,
                evidence={
                    "code": code,
                    "output": head.name,
                    "layer": head.layer,
                    "activation": head.activation,
                    "activation_source": head.source,
                    "units": head.units,
                    "loss": loss.name,
                    "loss_class": loss.cls,
                    "from_logits": loss.from_logits,
                },
                suggestion=suggestion,
            )
        )
    return findings


def lint_model(model, loss: Any = None) -> list[LintFinding]:
    """Checks the output activation of a model against its loss.

    Example:

    >>> import keras
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    >>> lint_model(model, loss="binary_crossentropy")
    []

    Args:
        model: a Keras model, compiled or not.
        loss: the loss to check against: a string, function, `Loss` object,
            or a list/dict with one per output. Defaults to `None`, meaning the
            loss the model was compiled with (only structural checks, such as
            a one-unit softmax, run when there is none).

    Returns:
        A list of `LintFinding` (empty for a matched model and loss).

    Raises:
        TypeError: if `model` is not a `keras.Model` or `loss` is not a loss.
        ValueError: if a list of losses does not have one entry per output.
    """
    heads = output_heads(model)
    if loss is None and getattr(model, "compiled", False):
        loss = getattr(model, "loss", None)
    losses = losses_per_output(loss, [h.name for h in heads])
    findings = []
    for head, info in zip(heads, losses):
        findings.extend(lint_head(head, info))
    return findings
