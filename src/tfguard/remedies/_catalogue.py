"""The remedy catalogue: for a finding, the mechanical changes worth one trial each.

Long because: it is one registry, each remedy a short closure over the arguments of `compile`
or `fit` kept beside the `CATALOGUE` entry that chooses it, so the table and the choice are one.

A `Remedy` is one change a person would make in the script, applied from
outside through two hooks an `Intercept` calls: `on_compile(state, model,
arguments)` before `keras.Model.compile` (the optimizer, the loss, the
layers) and `on_fit(state, model, arguments)` before `keras.Model.fit` (the
data, the callbacks). `remedies_for(finding)` lists them for one finding, the
most likely first. One registry, `CATALOGUE`, says which: each `Entry`
names the findings it answers, what is tried (the text of the table
below, made from the registry by `catalogue_table`) and the function that
makes the remedies, so the table and the choice cannot disagree.

>>> print(catalogue_table())
==========================  ==================================================
finding                     remedies tried
==========================  ==================================================
learning_rate               too high: learning rate ×0.1; too low: ×10; then
                            the optimizer's Keras default (when the rate is
                            more than 20x away from it)
oscillating_loss            learning rate ×0.1
slow_convergence,           learning rate ×10; the optimizer's Keras default
no_learning
nonfinite,                  `clipnorm=1.0`; learning rate ×0.1 (none when only
exploding_gradient          the validation data is not finite)
unnormalized_input          `keras.layers.Normalization()` adapted on the
                            training data, first in the model
label_range                 the mapping the labels suggest (`{1..10} →
                            {0..9}`, `{-1, 1} → {0, 1}`)
loss_activation_mismatch    the output activation the loss needs, or
                            `from_logits=True`; for multi-hot targets, sigmoid
                            outputs with binary cross-entropy
dead_relu                   `kernel_initializer="he_normal"` (bias zeros);
                            activation relu → leaky_relu
vanishing_gradient          hidden sigmoid/tanh → relu with he_normal
saturated_activation        `kernel_initializer="glorot_uniform"` (bias
                            zeros); activation → relu with he_normal
overfitting                 `EarlyStopping(monitor="val_loss",
                            restore_best_weights=True)`
pipeline_order              the `tf.data` examples shuffled before batching
                            (`ds.unbatch().shuffle(n).batch(size)`)
trained_unused              the network inference never reads frozen
                            (`teacher.trainable = False`) in the model that
                            calls it
==========================  ==================================================

`plan(findings)` picks the trials for a diagnosis: warnings and errors only,
root causes first; a symptom the diagnosis attributes to another finding
that has a remedy is left to that finding's remedy (fixing the learning
rate is the trial for the dead ReLUs it caused). The normalization is
applied to the inputs `fit` gets, which is what the layer would compute
first in the model; the script's own `evaluate`/`predict` calls see their
inputs unchanged.

A remedy that changes what the loss measures (new label values, a new loss)
sets `rescore=True`: its trial then scores the original model and the
remedied one with the remedied loss on the same data, so the two numbers
compare.

Example:

>>> from tfguard._findings import Finding
>>> f = Finding("learning_rate", "error", "too high", evidence={"direction": "high",
...             "learning_rate": 1.0, "optimizer": "Adam"})
>>> [r.title for r in remedies_for(f)]
['learning_rate ×0.1', 'learning_rate 1 → 0.001 (Adam default)']
>>> [(f.id, r.key) for f, r in plan([f])]
[('learning_rate', 'learning_rate_x0.1'), ('learning_rate', 'learning_rate_default')]
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable, Iterable, Sequence

import keras
import tensorflow as tf

from tfguard._findings import Finding, fmt
from tfguard._hooks.keras_compat import nested_layers
from tfguard._losses import resolved_kind
from tfguard.diagnose._rules.optimizer import KERAS_DEFAULT_RATES
from tfguard.remedies import _edits
from tfguard.remedies._edits import NotApplicable

ALARMS = ("warning", "error")
PER_FINDING = 2  # remedies tried per finding, the most likely first
PATIENCE = 2  # EarlyStopping's patience, in epochs


@dataclasses.dataclass(frozen=True)
class Remedy:
    """One mechanical change, applied through `Intercept` hooks.

    Example:

    >>> r = Remedy("noop", "overfitting", "change nothing")
    >>> r.key, r.on_compile, r.rescore
    ('noop', None, False)

    Args:
        key: a short unique name, used in the trial's log folder.
        answers: the finding id it is a remedy for.
        title: the change in one line, before it meets the model
            (the trial reports the concrete change it made).
        on_compile: `(state, model, arguments) -> None`, called before each
            `compile` with its arguments (a dict to change). Defaults to `None`.
        on_fit: the same before each `fit`. Defaults to `None`.
        rescore: the change alters what the loss measures; both models are
            scored with the remedied loss on the same data. Defaults to `False`.
        target: `(model ordinal, layer index)` of the layer the finding
            names, in compile order, or `None`. Defaults to `None`.
    """

    key: str
    answers: str
    title: str
    on_compile: Callable | None = None
    on_fit: Callable | None = None
    rescore: bool = False
    target: tuple | None = None

    def aimed(self, target: tuple | None) -> Remedy:
        """The same remedy aimed at `(model ordinal, layer index)`."""
        return dataclasses.replace(self, target=target)


# -- the optimizer -----------------------------------------------------------------------------
def _optimizer_hook(change: Callable):
    def hook(state, model, arguments):
        optimizer, text = change(arguments.get("optimizer", "rmsprop"))
        arguments["optimizer"] = optimizer
        state.changed(text)
    return hook


def learning_rate_scaled(answers: str, factor: float) -> Remedy:
    """Multiplies the learning rate of every compiled optimizer by `factor`."""
    return Remedy(f"learning_rate_x{fmt(factor)}", answers, f"learning_rate ×{fmt(factor)}",
                  on_compile=_optimizer_hook(lambda o: _edits.scale_learning_rate(o, factor=factor)))


def learning_rate_default(answers: str, rate: float | None = None, name: str | None = None) -> Remedy:
    """Sets the learning rate to the optimizer's Keras default (unless it is within 2x of it)."""
    default = KERAS_DEFAULT_RATES.get(name or "")
    title = (f"learning_rate {fmt(rate)} → {fmt(default)} ({name} default)"
             if rate is not None and default else "learning_rate → the optimizer's Keras default")

    def change(optimizer):
        optimizer = _edits.optimizer_of(optimizer)
        kind = type(optimizer).__name__
        own = KERAS_DEFAULT_RATES.get(kind)
        if own is None:
            raise NotApplicable(f"no known default learning rate for {kind}")
        current = _edits.learning_rate_of(optimizer)
        if own / 2 <= current <= own * 2:
            raise NotApplicable(f"{kind}'s learning rate {fmt(current)} is near its default {fmt(own)}")
        optimizer, text = _edits.scale_learning_rate(optimizer, value=own)
        return optimizer, f"{text} ({kind} default)"

    return Remedy("learning_rate_default", answers, title, on_compile=_optimizer_hook(change))


def clipnorm(answers: str, value: float = 1.0) -> Remedy:
    """Clips every gradient to norm `value`."""
    return Remedy("clipnorm", answers, f"clipnorm={value}",
                  on_compile=_optimizer_hook(lambda o: _edits.set_clipnorm(o, value)))


# -- the data ----------------------------------------------------------------------------------
def _validation(arguments: dict, change: Callable) -> None:
    data = arguments.get("validation_data")
    if data is None:
        return
    arguments["validation_data"] = change(*data) if isinstance(data, (tuple, list)) else change(data)


def normalization(answers: str = "unnormalized_input") -> Remedy:
    """Standardizes the inputs with statistics of the training data (a `Normalization` layer's work)."""
    def on_fit(state, model, arguments):
        x = arguments.get("x")
        stats = state.memo.get(("stats", id(model)))
        if stats is None:
            stats = _edits.feature_stats(x, float(arguments.get("validation_split") or 0.0))
            state.memo[("stats", id(model))] = stats
        mean, std = stats
        arguments["x"] = _edits.standardize(x, mean, std)
        _validation(arguments, lambda vx, *rest: (_edits.standardize(vx, mean, std), *rest)
                    if rest else _edits.standardize(vx, mean, std))
        state.changed("add keras.layers.Normalization() adapted on the training data as the "
                      f"first layer (mean {fmt(float(mean.mean()))}, std {fmt(float(std.mean()))})")
    return Remedy("normalize_input", answers,
                  "add keras.layers.Normalization() adapted on the training data as the first layer",
                  on_fit=on_fit)


def _accepted_range(model, evidence: dict) -> tuple[float, float]:
    if "accepted_min" in evidence and "accepted_max" in evidence:
        return float(evidence["accepted_min"]), float(evidence["accepted_max"])
    units = getattr(_edits.output_layer(model), "units", None)
    kind = resolved_kind(_edits.crossentropy(getattr(model, "loss", None)).kind, units)
    if kind == "sparse_categorical" and units:
        return 0.0, float(units - 1)
    if kind in ("binary", "categorical"):
        return 0.0, 1.0
    raise NotApplicable("the accepted label range is unknown for this loss")


def label_remap(answers: str = "label_range", evidence: dict | None = None) -> Remedy:
    """Maps the labels onto the range the loss and output accept, the way the data suggests."""
    evidence = dict(evidence or {})

    def on_fit(state, model, arguments):
        key = ("labels", id(model))
        if key not in state.memo:
            x, y = arguments.get("x"), arguments.get("y")
            low, high = _accepted_range(model, evidence)
            values = _edits.label_values(x if y is None else y)
            state.memo[key] = _edits.label_mapping(values, low, high)
        source, target, text = state.memo[key]
        if arguments.get("y") is not None:
            arguments["y"] = _edits.remap_labels(arguments["y"], source, target)
        elif arguments.get("x") is not None:
            arguments["x"] = _edits.remap_labels(arguments["x"], source, target)

        def change(vx, *rest):
            if not rest:  # a dataset of (x, y) pairs
                return _edits.remap_labels(vx, source, target)
            return (vx, _edits.remap_labels(rest[0], source, target), *rest[1:])
        _validation(arguments, change)
        state.changed(text + " before fit")
    return Remedy("label_remap", answers, "map the labels onto the range the loss accepts",
                  on_fit=on_fit, rescore=True)


# -- the loss and the output layer ------------------------------------------------------------------
def matching_output(answers: str = "loss_activation_mismatch", target: tuple | None = None) -> Remedy:
    """The output activation the loss needs, or `from_logits=True` for a linear output."""
    def on_compile(state, model, arguments):
        if not state.once("head", id(model)):
            return
        loss = arguments.get("loss")
        info = _edits.crossentropy(loss)
        logits = info.from_logits is True
        layer = _layer(state, model, target) or _edits.output_layer(model)
        act = _edits.activation_name(layer)
        units = getattr(layer, "units", None) or getattr(layer, "filters", None)
        if act == "linear" and not logits:
            arguments["loss"], text = _edits.logits_loss(loss)
            state.changed(text)
            return
        multi_class = info.kind in ("sparse_categorical", "categorical", "auto_crossentropy")
        wanted = "softmax" if multi_class and (units or 2) > 1 else "sigmoid"
        if logits:
            wanted = "linear"
        if act == wanted:
            raise NotApplicable(f"the output activation is already {act}")
        state.changed("output " + _edits.set_activation(layer, wanted))
    return Remedy("output_activation", answers, "the output activation the loss needs "
                  "(or from_logits=True)", on_compile=on_compile, target=target)


def multi_label_head(answers: str = "loss_activation_mismatch", target: tuple | None = None) -> Remedy:
    """Sigmoid outputs with binary cross-entropy, for multi-hot targets."""
    def on_compile(state, model, arguments):
        if not state.once("head", id(model)):
            return
        layer = _layer(state, model, target) or _edits.output_layer(model)
        text = _edits.set_activation(layer, "sigmoid")
        arguments["loss"] = keras.losses.BinaryCrossentropy()
        state.changed(f"output {text}, loss binary_crossentropy")
    return Remedy("sigmoid_bce", answers, "sigmoid outputs with binary_crossentropy",
                  on_compile=on_compile, rescore=True, target=target)


# -- the layers -------------------------------------------------------------------------------------
def _layer(state, model, target: tuple | None):
    """The layer a target names in this model, or `None` (no target, or another model)."""
    if target is None:
        return None
    ordinal, index = target
    if state.ordinal(model) != ordinal:
        return None
    return _edits.output_layer(model, index)


def _hidden(model, activations: Sequence[str]) -> list:
    layers = [layer for layer in model.layers if _edits.activation_name(layer) in activations]
    try:
        out = _edits.output_layer(model)
    except NotApplicable:
        return layers
    return [layer for layer in layers if layer is not out]


def _layers_hook(activations: Sequence[str], change: Callable, target: tuple | None,
                 what: str):
    def on_compile(state, model, arguments):
        if not state.once("layers", id(model)):
            return
        if target is not None and state.ordinal(model) != target[0]:
            return
        one = _layer(state, model, target)
        layers = [one] if one is not None else _hidden(model, activations)
        if not layers:
            raise NotApplicable(f"no hidden {what} layer")
        done: dict[str, list[str]] = {}  # the change -> the layers it was made to
        for layer in layers:
            text = change(layer).removeprefix(f"layer '{layer.name}' ")
            done.setdefault(text, []).append(layer.name)
        for text, names in done.items():
            who = (f"layer '{names[0]}'" if len(names) == 1 else
                   f"{len(names)} layers ('{names[0]}' … '{names[-1]}')")
            state.changed(f"{who} {text}")
    return on_compile


def reinit(answers: str, initializer: str, activations: Sequence[str], target: tuple | None = None,
           what: str = "") -> Remedy:
    """Draws the named layer's kernel (or every hidden layer with one of `activations`) afresh."""
    return Remedy(f"init_{initializer}", answers,
                  f'kernel_initializer="{initializer}", bias_initializer="zeros"',
                  on_compile=_layers_hook(activations, lambda layer: _edits.reinitialize(
                      layer, initializer), target, what or "/".join(activations)),
                  target=target)


def activation_swap(answers: str, new: str, activations: Sequence[str], target: tuple | None = None,
                    initializer: str | None = None) -> Remedy:
    """Changes the activation of the named layer (or every hidden one with `activations`)."""
    def change(layer):
        text = _edits.set_activation(layer, new)
        if initializer:
            text += ", " + _edits.reinitialize(layer, initializer).split(" ", 2)[2]
        return text
    more = f' with kernel_initializer="{initializer}"' if initializer else ""
    return Remedy(f"activation_{new}", answers,
                  f"hidden activation {'/'.join(activations)} → {new}{more}",
                  on_compile=_layers_hook(activations, change, target, "/".join(activations)),
                  target=target)


# -- the callbacks ---------------------------------------------------------------------------------
def early_stopping(answers: str = "overfitting", patience: int = PATIENCE) -> Remedy:
    """`EarlyStopping(monitor="val_loss", restore_best_weights=True)` added to each fit with validation."""
    def on_fit(state, model, arguments):
        if arguments.get("validation_data") is None and not arguments.get("validation_split"):
            raise NotApplicable("the fit has no validation data to stop on")
        stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=patience,
                                                restore_best_weights=True)
        callbacks = arguments.get("callbacks")
        if callbacks is not None and not isinstance(callbacks, (list, tuple)):
            raise NotApplicable("the callbacks are a CallbackList")
        arguments["callbacks"] = [*(callbacks or ()), stopper]
        state.current.stopper = stopper
        state.changed(f'callbacks=[keras.callbacks.EarlyStopping(monitor="val_loss", '
                      f'patience={patience}, restore_best_weights=True)]')
    return Remedy("early_stopping", answers, "EarlyStopping on val_loss, restoring the best weights",
                  on_fit=on_fit)


def shuffle_before_batch(answers: str = "pipeline_order", buffer: int = 10_000) -> Remedy:
    """Re-batches a `tf.data` input so its examples are shuffled before they are batched."""
    def on_fit(state, model, arguments):
        x = arguments.get("x")
        if not isinstance(x, tf.data.Dataset):
            raise NotApplicable("the input is not a tf.data.Dataset")
        first = next(iter(x.take(1)), None)
        if first is None:
            raise NotApplicable("the dataset is empty")
        leading = tf.nest.flatten(first)[0]
        size = int(leading.shape[0]) if leading.shape.rank else None
        if not size:
            raise NotApplicable("the dataset is not batched")
        batches = int(x.cardinality())
        shuffled = x.unbatch().shuffle(buffer, seed=0).batch(size)
        if batches > 0:  # as many batches as before, and Keras knows how many
            shuffled = shuffled.take(batches).apply(tf.data.experimental.assert_cardinality(batches))
        arguments["x"] = shuffled
        state.changed(f"ds.unbatch().shuffle({buffer}).batch({size}): the examples are shuffled "
                      "before they are batched")
    return Remedy("shuffle_before_batch", answers, "shuffle the examples before batching them",
                  on_fit=on_fit)


# -- the model's parts ---------------------------------------------------------------------------
def freeze(answers: str = "trained_unused", names: Sequence[str] = ()) -> Remedy:
    """`layer.trainable = False` for the named networks nested in the model being compiled.

    A distillation model's teacher is trained on its own first (its own
    `compile`/`fit` are left alone); when a model that holds it is compiled,
    the teacher is frozen, so that model's optimizer no longer moves it.
    """
    def on_compile(state, model, arguments):
        for layer in nested_layers(model):
            if layer.name in names and layer.trainable and state.once("freeze", id(layer)):
                layer.trainable = False
                state.changed(f"{layer.name}.trainable = False (in '{model.name}', before compile)")
    shown = ", ".join(names) or "the unused network"
    return Remedy("freeze_unused", answers, f"{shown}.trainable = False before compile",
                  on_compile=on_compile)


# -- the catalogue -----------------------------------------------------------------------------------
_SQUASHING = ("sigmoid", "tanh")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One row of the catalogue: the findings it answers, what is tried, and how.

    Example:

    >>> e = Entry(("overfitting",), "EarlyStopping", lambda f, target: [early_stopping(f.id)])
    >>> [r.key for r in e.make(Finding("overfitting", "warning", "x"), None)]
    ['early_stopping']

    Args:
        answers: the finding ids it is the entry for.
        tried: the remedies, in words, the most likely first (the table's text).
        make: `(finding, target) -> list[Remedy]`, the remedies for one
            finding (an empty list when its evidence rules them out).
    """

    answers: tuple[str, ...]
    tried: str
    make: Callable[[Finding, tuple | None], list[Remedy]]


def _learning_rate(finding: Finding, target: tuple | None) -> list[Remedy]:
    ev, fid = finding.evidence, finding.id
    rate = ev.get("learning_rate")
    rate = float(rate) if isinstance(rate, (int, float)) and rate == rate else None
    name = ev.get("optimizer")
    default = KERAS_DEFAULT_RATES.get(name or "")
    low = ev.get("direction") == "low"
    found = [learning_rate_scaled(fid, 10.0 if low else 0.1)]
    if default and rate and (rate * 10 < default / 2 if low else rate / 10 > 2 * default):
        found.append(learning_rate_default(fid, rate, name))
    return found


def _blow_up(finding: Finding, target: tuple | None) -> list[Remedy]:
    if finding.evidence.get("validation_only"):  # NaN in the validation data: no training change helps
        return []
    return [clipnorm(finding.id), learning_rate_scaled(finding.id, 0.1)]


def _output(finding: Finding, target: tuple | None) -> list[Remedy]:
    if finding.evidence.get("code") == "multi_hot_softmax":
        return [multi_label_head(finding.id, target)]
    return [matching_output(finding.id, target)]


def _freeze_unused(finding: Finding, target: tuple | None) -> list[Remedy]:
    named = finding.evidence.get("freeze")  # "teacher" or "a, b" (the report's text form)
    if not named:
        return []
    names = named if isinstance(named, list) else str(named).split(", ")
    return [freeze(finding.id, tuple(names))]


CATALOGUE: tuple[Entry, ...] = (
    Entry(("learning_rate",), "too high: learning rate ×0.1; too low: ×10; then the optimizer's "
          "Keras default (when the rate is more than 20x away from it)", _learning_rate),
    Entry(("oscillating_loss",), "learning rate ×0.1",
          lambda f, target: [learning_rate_scaled(f.id, 0.1)]),
    Entry(("slow_convergence", "no_learning"), "learning rate ×10; the optimizer's Keras default",
          lambda f, target: [learning_rate_scaled(f.id, 10.0), learning_rate_default(f.id)]),
    Entry(("nonfinite", "exploding_gradient"), "`clipnorm=1.0`; learning rate ×0.1 (none when "
          "only the validation data is not finite)", _blow_up),
    Entry(("unnormalized_input",), "`keras.layers.Normalization()` adapted on the training data, "
          "first in the model", lambda f, target: [normalization(f.id)]),
    Entry(("label_range",), "the mapping the labels suggest (`{1..10} → {0..9}`, "
          "`{-1, 1} → {0, 1}`)", lambda f, target: [label_remap(f.id, f.evidence)]),
    Entry(("loss_activation_mismatch",), "the output activation the loss needs, or "
          "`from_logits=True`; for multi-hot targets, sigmoid outputs with binary cross-entropy",
          _output),
    Entry(("dead_relu",), '`kernel_initializer="he_normal"` (bias zeros); activation relu → '
          "leaky_relu", lambda f, target: [reinit(f.id, "he_normal", ("relu",), target),
                                           activation_swap(f.id, "leaky_relu", ("relu",), target)]),
    Entry(("vanishing_gradient",), "hidden sigmoid/tanh → relu with he_normal",
          lambda f, target: [activation_swap(f.id, "relu", _SQUASHING, None,
                                             initializer="he_normal")]),
    Entry(("saturated_activation",), '`kernel_initializer="glorot_uniform"` (bias zeros); '
          "activation → relu with he_normal",
          lambda f, target: [reinit(f.id, "glorot_uniform", _SQUASHING, target),
                             activation_swap(f.id, "relu", _SQUASHING, target,
                                             initializer="he_normal")]),
    Entry(("overfitting",), '`EarlyStopping(monitor="val_loss", restore_best_weights=True)`',
          lambda f, target: [early_stopping(f.id)]),
    Entry(("pipeline_order",), "the `tf.data` examples shuffled before batching "
          "(`ds.unbatch().shuffle(n).batch(size)`)", lambda f, target: [shuffle_before_batch(f.id)]),
    Entry(("trained_unused",), "the network inference never reads frozen "
          "(`teacher.trainable = False`) in the model that calls it", _freeze_unused),
)
"""Every finding the catalogue has remedies for, in the order the table lists them."""

_BY_ID = {fid: entry for entry in CATALOGUE for fid in entry.answers}


def catalogue_table(width: int = 50) -> str:
    """`CATALOGUE` as the table of the module's docstring: finding ids, then what is tried.

    Example:

    >>> catalogue_table().splitlines()[3]
    'learning_rate               too high: learning rate ×0.1; too low: ×10; then'

    Args:
        width: the width of the second column. Defaults to `50`.
    """
    rule = "=" * 26 + "  " + "=" * width
    lines = [rule, f"{'finding':<26}  remedies tried", rule]
    for entry in CATALOGUE:
        ids = [fid + "," for fid in entry.answers[:-1]] + [entry.answers[-1]]
        tried = textwrap.wrap(entry.tried, width, break_on_hyphens=False)
        for i in range(max(len(ids), len(tried))):
            left = ids[i] if i < len(ids) else ""
            right = tried[i] if i < len(tried) else ""
            lines.append(f"{left:<26}  {right}".rstrip())
    return "\n".join([*lines, rule])


def remedies_for(finding: Finding, target: tuple | None = None) -> list[Remedy]:
    """The remedies worth a trial for one finding, the most likely first (may be empty).

    Example:

    >>> from tfguard._findings import Finding
    >>> [r.key for r in remedies_for(Finding("dead_relu", "warning", "dead", where="dense_1"))]
    ['init_he_normal', 'activation_leaky_relu']

    Args:
        finding: a `Finding` (or its dict).
        target: `(model ordinal, layer index)` of the layer the finding names
            (`where`), when known. Defaults to `None`.
    """
    if isinstance(finding, dict):
        finding = Finding.from_dict(finding)
    entry = _BY_ID.get(finding.id)
    return entry.make(finding, target) if entry is not None else []


def plan(findings: Iterable, *, per_finding: int = PER_FINDING, locate: Callable | None = None,
         max_trials: int | None = None) -> list[tuple[Finding, Remedy]]:
    """The trials for a diagnosis: `(finding, remedy)` pairs, root causes first, each remedy once.

    Example:

    >>> from tfguard._findings import Finding
    >>> root = Finding("unnormalized_input", "warning", "raw pixels")
    >>> dead = Finding("dead_relu", "warning", "dead", cause=("unnormalized_input", None))
    >>> [(f.id, r.key) for f, r in plan([root, dead, Finding("overfitting", "info", "x")])]
    [('unnormalized_input', 'normalize_input')]

    Args:
        findings: `Finding`s (or their dicts), as a diagnosis lists them.
        per_finding: remedies tried per finding. Defaults to `2`.
        locate: `where -> (model ordinal, layer index) | None`, to aim a
            remedy at the layer a finding names. Defaults to `None`.
        max_trials: the most trials. Defaults to `None` (no limit).

    Returns:
        The pairs, in the order to try them.
    """
    findings = [Finding.from_dict(f) if isinstance(f, dict) else f for f in findings]
    alarms = [f for f in findings if f.severity in ALARMS]
    curable = {f.key for f in alarms if remedies_for(f)}
    chosen: list[tuple[Finding, Remedy]] = []
    seen: set[str] = set()
    for finding in alarms:
        if finding.cause is not None and tuple(finding.cause) in curable and finding.key != tuple(finding.cause):
            continue  # its cause's remedy is its trial
        target = locate(finding.where) if (locate is not None and finding.where) else None
        for remedy in remedies_for(finding, target)[:per_finding]:
            if remedy.key in seen:
                continue
            seen.add(remedy.key)
            chosen.append((finding, remedy))
    return chosen[:max_trials] if max_trials is not None else chosen


__all__ = ["ALARMS", "CATALOGUE", "PATIENCE", "PER_FINDING", "Entry", "Remedy", "activation_swap",
           "catalogue_table", "clipnorm", "early_stopping", "freeze", "label_remap",
           "learning_rate_default", "learning_rate_scaled", "matching_output", "multi_label_head",
           "normalization", "plan", "reinit", "remedies_for", "shuffle_before_batch"]
