"""Kernel initializers far too wide or far too narrow, and the growth before a NaN.

Two faults the growth test of `exploding_gradient` cannot see (issue 22),
and one that `vanishing_gradient` and `dead_relu` only show the result of
(issue 41):

- *A bad initializer* (`RandomNormal(stddev=3)` in a convnet) makes the
  network explode from step 0: there is no growth over an early median,
  since the early median is already huge. The evidence is the model's own
  description and its first steps: a layer whose kernel initializer draws
  weights `init_std_ratio` times wider than He initialization for its
  fan-in (`sqrt(2 / fan_in)`, the widest of the standard schemes: He et
  al., ICCV 2015; Glorot and Bengio, AISTATS 2010), *and* a run hurt from
  the start: a first loss `init_loss_factor` times a uniform guess's
  (the chance loss of a fresh classifier), or a loss that turns non-finite
  within the first `init_window` steps. Inputs that are not normalized
  explain a huge first loss as well, so the rule stays quiet then
  (`unnormalized_input` speaks). Layers with sigmoid/tanh are left to
  `saturated_activation`, which names their initializer.
- *Growth before a NaN*: a run that dies within a few steps has too few
  finite observations for a baseline; when a gradient norm grew by
  `explode_before_nan_growth` between its first observation and the last
  one before the run died, the growth is reported with its onset, its
  layer and its rate per step.
- *Initializers far too narrow for their depth* (`RandomUniform(-0.05,
  0.05)` on eight ReLU layers of 5 units; Glorot on 33 plain ReLU layers):
  each layer shrinks the signal by its weights' std over the std that
  keeps the signal's size (He's before a ReLU), the product over the stack
  falls below `init_narrow_signal`, and the gradients vanish while ReLU
  units stay at 0. From the description alone it is a remark; training
  that shows those symptoms makes it the cause of both (`narrow_initialization`).

Example:

>>> from tfguard.diagnose import Signals, Thresholds
>>> model = {"loss": "sparse_categorical_crossentropy", "output_units": 10, "layers": [
...     {"name": "conv", "activation": "relu",
...      "initializer": {"text": "RandomNormal(stddev=3)", "std": 3.0, "fan_in": 9}}]}
>>> s = Signals.from_arrays({"batch/loss": ([1, 11], [14000.0, 9000.0]),
...                          "grad_norm/conv": ([1, 11], [3000.0, 2500.0])}, model=model)
>>> f = initialization(s, Thresholds())[0]
>>> f.id, f.where, f.evidence["code"]
('exploding_gradient', 'conv', 'initialization')
"""

from __future__ import annotations

import math

import numpy as np

from tfguard import _tags
from tfguard._findings import Finding, fmt
from tfguard.diagnose._inputs.signals import Series, Signals
from tfguard.diagnose._rules.base import chance_loss
from tfguard.diagnose._thresholds import Thresholds

_SATURATING = {"sigmoid", "tanh", "softmax", "hard_sigmoid", "softsign"}


def too_wide(signals: Signals, thresholds: Thresholds) -> list[tuple[dict, float, float]]:
    """`(layer description, std / He std, He std)` of each layer whose initializer is far too wide."""
    found = []
    for layer in (signals.model or {}).get("layers", []):
        init = layer.get("initializer") or {}
        std, fan_in = init.get("std"), init.get("fan_in")
        if not isinstance(std, (int, float)) or not fan_in:
            continue
        he = math.sqrt(2.0 / fan_in)
        if std >= thresholds.init_std_ratio * he:
            found.append((layer, std / he, he))
    return found


_RELU_FAMILY = {"relu", "relu6", "leaky_relu", "elu", "selu", "gelu", "silu", "swish", "mish"}
_RESTORING = ("Normalization",)  # BatchNormalization, LayerNormalization, ...: the scale is reset
_MERGING = {"Add", "Subtract", "Average", "Multiply", "Maximum", "Minimum", "Concatenate", "Dot"}


def _activation_after(layers: list[dict], i: int) -> str:
    """The activation a kernel layer's output goes through: its own, or a following `Activation`'s."""
    own = str(layers[i].get("activation") or "linear").lower()
    if own not in ("linear", "none") or i + 1 >= len(layers):
        return own
    following = layers[i + 1]
    if following.get("class") in ("Activation", "ReLU", "LeakyReLU", "ELU", "PReLU"):
        return str(following.get("activation") or following.get("class")).lower()
    return own


def too_narrow(signals: Signals, thresholds: Thresholds) -> dict | None:
    """The plain stack of hidden layers whose initializers shrink the signal below `init_narrow_signal`.

    Walks the model description's layers in order; each hidden kernel layer
    multiplies the signal's size by its weights' std over the std that keeps
    a signal's size through it (He's `sqrt(2 / fan_in)` before a ReLU,
    LeCun's `sqrt(1 / fan_in)` otherwise); a normalization layer starts the
    product again. The output layer is left out (a zero-initialized head is
    a common, harmless choice), and so are models that merge branches (a
    residual connection carries the signal around the stack) and layers
    whose weights are all zero (a symmetry, not a scale, problem).

    Returns:
        `{"factor", "layers", "first", "narrowest", "ratio", "initializers"}`
        of the first stack whose product falls below `init_narrow_signal`,
        else `None`.
    """
    layers = list((signals.model or {}).get("layers", []))
    if any(layer.get("class") in _MERGING for layer in layers):
        return None
    kernels = [i for i, layer in enumerate(layers)
               if isinstance((layer.get("initializer") or {}).get("std"), (int, float))
               and (layer.get("initializer") or {}).get("fan_in")]
    if len(kernels) < 2:
        return None
    stacks: list[list] = [[]]
    for i in range(kernels[0], kernels[-1]):  # up to, not including, the output layer
        layer = layers[i]
        if any(word in str(layer.get("class", "")) for word in _RESTORING):
            stacks.append([])
            continue
        init = layer.get("initializer") or {}
        if i not in kernels or init["std"] <= 0:
            continue
        activation = _activation_after(layers, i)
        reference = math.sqrt((2.0 if activation in _RELU_FAMILY else 1.0) / init["fan_in"])
        stacks[-1].append((layer, init["std"] / reference, reference, activation))
    for stack in stacks:
        factor = math.prod(entry[1] for entry in stack)
        if stack and factor < thresholds.init_narrow_signal:
            first = next(entry for entry in stack if entry[1] < 1.0)
            narrowest = min(stack, key=lambda entry: entry[1])
            return {"factor": factor, "layers": stack, "first": first, "narrowest": narrowest,
                    "initializers": list(dict.fromkeys(
                        (e[0]["initializer"].get("text") or e[0]["initializer"].get("class"))
                        for e in stack))}
    return None


def narrow_initialization(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports kernel initializers that, layer after layer, shrink the signal to nothing.

    A remark (`info`, `evidence["needs_symptom"]`): it becomes a warning, and
    the cause listed first, when training shows what it produces
    (`tfguard.diagnose._causes`: vanishing gradients, dead ReLUs, an output
    that collapsed, no learning). Its id is `vanishing_gradient` with
    `evidence["code"] == "initialization"`, as a too-wide initializer's is
    `exploding_gradient`.

    Args:
        signals: the run, with its model description (layers' `initializer`).
        thresholds: uses `init_narrow_signal`.

    Returns:
        At most one finding, at the first layer of the stack drawn narrower than its reference.
    """
    found = too_narrow(signals, thresholds)
    if found is None:
        return []
    layer, ratio, reference, activation = found["first"]
    narrowest = found["narrowest"]
    last = found["layers"][-1][0]
    relu = sum(1 for entry in found["layers"] if entry[3] in _RELU_FAMILY)
    kinds = f"{len(found['layers'])} layers ({relu} before a ReLU-family activation)"
    message = (
        f"the kernel initializers of {kinds} from '{layer['name']}' to '{last['name']}' draw "
        f"weights narrower than the scale that keeps a signal's size ('{layer['name']}': "
        f"{found['initializers'][0]}, std {fmt(layer['initializer']['std'])} against "
        f"{fmt(reference)} for its fan-in of {layer['initializer']['fan_in']}, {fmt(ratio)}x"
        + (f"; narrowest '{narrowest[0]['name']}', {fmt(narrowest[1])}x" if narrowest is not found["first"] else "")
        + f"): through the stack the signal, and the gradient coming back, shrink to "
        f"{fmt(found['factor'])} of their size, so activations and gradients vanish and ReLU units "
        "stay at 0.")
    evidence = {"code": "initialization", "direction": "narrow", "needs_symptom": 1,
                "initializer": found["initializers"][0], "signal_factor": found["factor"],
                "std_ratio": ratio, "reference_std": reference,
                "narrowest_ratio": narrowest[1], "layers_in_stack": len(found["layers"])}
    return [Finding(
        "vanishing_gradient", "info", message, where=signals.layer_path(layer["name"]),
        onset_step=0, onset_epoch=0, evidence=evidence,
        suggestion=("Use `kernel_initializer='he_normal'` (or 'he_uniform') in the ReLU layers and "
                    "'lecun_normal' in the others; for a stack this deep, add BatchNormalization "
                    "or residual connections."),
    )]


def _normalized_inputs(signals: Signals, thresholds: Thresholds) -> bool:
    if signals.normalizes_input():
        return True
    std = signals.series(_tags.INPUT_STD)
    if std is None:
        return True  # nothing says otherwise
    values = np.abs(std.values[np.isfinite(std.values)])
    return not len(values) or float(np.median(values)) <= thresholds.input_std_max


def _early(series: Series | None, window: int) -> Series | None:
    if series is None:
        return None
    keep = (series.steps >= 0) & (series.steps <= window)
    return Series(series.steps[keep], series.values[keep], series.epochs[keep]) if keep.any() else None


def _harm(signals: Signals, thresholds: Thresholds) -> dict | None:
    """What shows the run hurt from its first steps, or `None`."""
    loss = _early(signals.series(_tags.batch("loss")), thresholds.init_window)
    if loss is None:
        return None
    finite = loss.values[np.isfinite(loss.values)]
    if len(finite) < len(loss):
        return {"nonfinite_at": int(loss.steps[np.argmax(~np.isfinite(loss.values))]),
                **({"first_loss": float(finite[0])} if len(finite) else {})}
    chance = chance_loss(signals)
    if chance and len(finite) and finite[0] >= thresholds.init_loss_factor * chance:
        return {"first_loss": float(finite[0]), "chance_loss": chance}
    return None


def growth_before_death(signals: Signals, death_step: int | None,
                        thresholds: Thresholds) -> dict | None:
    """How a gradient norm grew over the finite observations before the run died, or `None`.

    Returns:
        `{"layer", "from", "to", "from_step", "to_step", "growth", "per_step", "death_step"}`
        for the layer (or `"global"`) whose norm grew the most, when it grew
        `explode_before_nan_growth` times.
    """
    if death_step is None:
        return None
    candidates = dict(signals.per_layer("grad_norm"))
    glob = signals.series(_tags.GLOBAL_GRAD_NORM)
    if glob is not None:
        candidates["global"] = glob
    best = None
    for name, s in candidates.items():
        keep = (s.steps >= 0) & (s.steps < death_step) & np.isfinite(s.values) & (s.values > 0)
        if keep.sum() < 2:
            continue
        steps, values = s.steps[keep], s.values[keep]
        growth = float(values[-1] / values[0])
        if growth < thresholds.explode_before_nan_growth:
            continue
        per_step = growth ** (1.0 / max(1, int(steps[-1] - steps[0])))
        entry = {"layer": name, "from": float(values[0]), "to": float(values[-1]),
                 "from_step": int(steps[0]), "to_step": int(steps[-1]), "growth": growth,
                 "per_step": per_step, "death_step": int(death_step)}
        # a layer rather than the global norm, then the fastest growth
        if best is None or (best["layer"] == "global" and name != "global") or (
                (name != "global") == (best["layer"] != "global") and per_step > best["per_step"]):
            best = entry
    return best


def growth_text(g: dict) -> str:
    """One sentence for `growth_before_death`'s result."""
    label = "the global gradient norm" if g["layer"] == "global" else \
        f"the gradient norm of layer '{g['layer']}'"
    return (f"before the run turned non-finite at step {g['death_step']}, {label} grew "
            f"{fmt(g['growth'])}x, from {fmt(g['from'])} at step {g['from_step']} to "
            f"{fmt(g['to'])} at step {g['to_step']} ({fmt(g['per_step'])}x per step)")


def initialization(signals: Signals, thresholds: Thresholds,
                   growth: dict | None = None) -> list[Finding]:
    """Reports a kernel initializer far too wide that hurts the run from its first steps.

    Args:
        signals: the run, with its model description (layers' `initializer`) and `batch/loss`.
        thresholds: uses `init_std_ratio`, `init_loss_factor`, `init_window`, `input_std_max`.
        growth: the growth before the run died (`growth_before_death`), told in the message.

    Returns:
        At most one `exploding_gradient` finding with `evidence["code"] == "initialization"`.
    """
    wide = [w for w in too_wide(signals, thresholds)
            if str(w[0].get("activation") or "").lower() not in _SATURATING]
    if not wide or not _normalized_inputs(signals, thresholds):
        return []
    harm = _harm(signals, thresholds)
    if harm is None:
        return []
    layer, ratio, he = wide[0]
    init = layer["initializer"]
    names = {n.rsplit("/", 1)[-1]: n for n in signals.per_layer("grad_norm")}
    where = names.get(layer["name"], layer["name"])
    others = f" (and {len(wide) - 1} more layer(s))" if len(wide) > 1 else ""
    if "nonfinite_at" in harm:
        hurt = f"the loss turned non-finite at step {harm['nonfinite_at']}"
    else:
        hurt = (f"the first loss is {fmt(harm['first_loss'])}, {fmt(harm['first_loss'] / harm['chance_loss'])}x "
                f"a uniform guess's ({fmt(harm['chance_loss'])})")
    norm = signals.series(_tags.grad_norm(where)) or signals.series(_tags.GLOBAL_GRAD_NORM)
    first_norm = float(norm.values[0]) if norm is not None and np.isfinite(norm.values[0]) else None
    message = (f"layer '{where}' draws its weights with {init.get('text') or init.get('class')}, "
               f"{fmt(ratio)}x wider than He initialization for its fan-in of {init['fan_in']} "
               f"(std {fmt(he)}){others}: activations and gradients explode from the first step; "
               f"{hurt}" + (f", the gradient norm starts at {fmt(first_norm)}" if first_norm else ""))
    if growth is not None:
        message += "; " + growth_text(growth)
    evidence = {"code": "initialization", "initializer": init.get("text") or init.get("class"),
                "std_ratio_to_he": ratio, "he_std": he, "layers_too_wide": len(wide), **harm}
    if first_norm is not None:
        evidence["first_grad_norm"] = first_norm
    if growth is not None:
        evidence.update({f"growth_{k}": v for k, v in growth.items() if k != "layer"},
                        growth_layer=growth["layer"])
    steps = signals.series(_tags.batch("loss")).steps
    return [Finding(
        "exploding_gradient", "error" if "nonfinite_at" in harm else "warning", message + ".",
        where=where, onset_step=int(steps[0]) if len(steps) else 0, onset_epoch=0, evidence=evidence,
        suggestion=(f"Use the default initializer (glorot_uniform) or `kernel_initializer='he_normal'` "
                    f"for ReLU layers in '{where}'; a RandomNormal stddev near {fmt(he)} suits its "
                    "fan-in."),
    )]


__all__ = ["growth_before_death", "growth_text", "initialization", "narrow_initialization", "too_narrow",
           "too_wide"]
