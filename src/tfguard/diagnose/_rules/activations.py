"""Rules `dead_relu` and `saturated_activation`, from per-layer activation statistics.

DeepDiagnosis (ICSE 2022) calls a node dead when >= 70 % of its activations
are <= 0 and an activation saturated when > 50 % of its pre-activations lie
outside +-5 before a sigmoid or tanh. AUTOTRAINER (ICSE 2021) calls ReLUs
dying when >= 70 % of all gradient entries are exactly zero. tfguard's
logger writes, per layer, the fraction of units that are <= 0 for the whole
batch (`activation/dead_fraction/<layer>`) and the fraction of
pre-activations outside +-5 (`activation/saturated_fraction/<layer>`); these
rules compare them with the published thresholds for `persistence`
consecutive observations, one finding per layer, so the layer is named.
Like DeepDiagnosis, saturation is judged on hidden layers: the output layer
(known from the model description) is left out, since a trained classifier's
sigmoid output saturates when it is confident.
Without activation statistics, `dead_relu` falls back on the per-layer
fraction of zero gradient entries (`zero_grad_fraction/<layer>`), skipping
embedding and sigmoid/tanh/softmax layers, whose zeros mean something else.
Zero gradient entries are not dead units (a wide ReLU layer fed by a
2-dimensional latent has many by construction, issue 22), and a warning
needs evidence that the run is hurt: while every loss keeps falling
(`run_improving`), a finding is an `info`, unless the layer is dead as a
whole (`dead_error_fraction` of its units at the last observation).
Layers are named by their path (`decoder/dense`).

Example:

>>> from tfguard.diagnose import Signals, Thresholds
>>> from tfguard.diagnose._rules.activations import dead_relu
>>> s = Signals.from_arrays({"activation/dead_fraction/dense": ([1, 2, 3, 4], [0.1, 0.8, 0.9, 0.9])})
>>> f = dead_relu(s, Thresholds())[0]
>>> f.where, f.onset_step
('dense', 2)
"""

from __future__ import annotations

import numpy as np

from tfguard._findings import Finding, fmt
from tfguard.diagnose._inputs.signals import MissingSignals, Series, Signals
from tfguard.diagnose._rules.base import (
    first_persistent,
    onset,
    remark_when_improving,
    run_improving,
)
from tfguard.diagnose._rules.initialization import too_wide
from tfguard.diagnose._thresholds import Thresholds

_NOT_RELU = {"sigmoid", "tanh", "softmax", "softplus", "softsign", "linear", "exponential"}


def _persistent_layers(layers: dict[str, Series], threshold: float, persistence: int):
    """`(name, series, start)` of each layer at or above `threshold` for `persistence`
    observations in a row, whose median from then on is still at or above it.

    A layer that crossed the threshold for a few observations and then
    recovered is not reported: a finding never states a figure below its
    own threshold (issue 41: dead_relu at 68.8 % against 70 %).
    """
    for name, s in layers.items():
        finite = np.isfinite(s.values)
        mask = finite & (s.values >= threshold)
        start = first_persistent(mask, persistence)
        while start is not None:
            tail = s.values[start:][finite[start:]]
            if float(np.median(tail)) >= threshold:
                yield name, s, start
                break
            following = first_persistent(mask[start + 1:], persistence)
            start = None if following is None else start + 1 + following


def _at(signals: Signals, s: Series, start: int) -> dict:
    at = onset(s, start)
    if at["onset_epoch"] is None:
        at["onset_epoch"] = signals.epoch_of(at["onset_step"])
    return at


def dead_relu(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports ReLU layers most of whose units never fire.

    Args:
        signals: the run, with `activation/dead_fraction/<layer>` or
            `zero_grad_fraction/<layer>`.
        thresholds: uses `dead_fraction`, `dead_error_fraction`,
            `zero_grad_fraction`, `persistence`.

    Returns:
        One finding per dying layer (error when the layer is entirely dead).

    Raises:
        MissingSignals: without activation or zero-gradient statistics.
    """
    layers = signals.per_layer("dead_fraction")
    source, limit = "dead_fraction", thresholds.dead_fraction
    if not layers:
        source, limit = "zero_grad_fraction", thresholds.zero_grad_fraction
        layers = {}
        for name, s in signals.per_layer("zero_grad_fraction").items():
            desc = signals.layer(name) or {}
            if "embedding" in str(desc.get("class", name)).lower():
                continue
            if str(desc.get("activation") or "").lower() in _NOT_RELU:
                continue
            layers[name] = s
        if not layers and not signals.per_layer("zero_grad_fraction"):
            raise MissingSignals(
                "no activation statistics (activation/dead_fraction/<layer>) and no "
                "zero-gradient fractions (zero_grad_fraction/<layer>)"
            )
    findings = []
    improving = run_improving(signals, thresholds)
    for name, s, start in _persistent_layers(layers, limit, thresholds.persistence):
        tail = s.values[start:]
        tail = tail[np.isfinite(tail)]
        median, final = float(np.median(tail)), float(tail[-1])
        severity = "error" if final >= thresholds.dead_error_fraction else "warning"
        what = "units are <= 0 for whole batches" if source == "dead_fraction" else \
            "gradient entries are exactly zero"
        path = signals.layer_path(name)
        message = (f"{fmt(100 * median)}% of layer '{path}' {what} (threshold {fmt(100 * limit)}%), "
                   f"{fmt(100 * final)}% at the last observation.")
        evidence = {source: median, "final": final, "observations": len(tail)}
        if improving and (source == "zero_grad_fraction" or final < thresholds.dead_error_fraction):
            # a warning needs evidence that the run is hurt: with every loss still falling, some
            # silent units (or zero gradient entries, which a wide layer fed by a narrow one has
            # by construction) are a remark; a layer dead as a whole stays an error
            severity = "info"
            evidence["run_improving"] = 1
            message += " The run is not hurt (its losses keep falling): a remark, not a warning."
        findings.append(Finding(
            "dead_relu", severity, message,
            where=path, **_at(signals, s, start),
            evidence=evidence,
            suggestion=("Lower the learning rate, use LeakyReLU/ELU/GELU in "
                        f"'{path}', He initialization with zero biases, or BatchNormalization "
                        "before the activation."),
        ))
    return findings


def saturated_activation(signals: Signals, thresholds: Thresholds) -> list[Finding]:
    """Reports sigmoid/tanh layers whose pre-activations sit in the flat tails.

    Args:
        signals: the run, with `activation/saturated_fraction/<layer>`.
        thresholds: uses `saturated_fraction`, `persistence`.

    Returns:
        One finding per saturated layer.

    Raises:
        MissingSignals: without saturation statistics.
    """
    layers = signals.per_layer("saturated_fraction")
    if not layers:
        raise MissingSignals("no saturation statistics (activation/saturated_fraction/<layer>)")
    # a saturated output sigmoid is a confident classifier, not a symptom
    layers.pop(signals.output_layer(), None)
    findings = []
    for name, s, start in _persistent_layers(layers, thresholds.saturated_fraction,
                                             thresholds.persistence):
        tail = s.values[start:]
        tail = tail[np.isfinite(tail)]
        median = float(np.median(tail))
        desc = signals.layer(name) or {}
        act = desc.get("activation") or "sigmoid/tanh"
        evidence = {"saturated_fraction": median, "final": float(tail[-1]), "observations": len(tail)}
        why = ""
        wide = {w[0].get("name"): w for w in too_wide(signals, thresholds)}
        if desc.get("name") in wide:  # the layer's own initializer puts it in the tails
            _, ratio, he = wide[desc["name"]]
            init = desc["initializer"]
            evidence.update(code="initialization", initializer=init.get("text") or init.get("class"),
                            std_ratio_to_he=ratio)
            why = (f" Its weights are drawn with {init.get('text') or init.get('class')}, "
                   f"{fmt(ratio)}x wider than He initialization for its fan-in of {init['fan_in']} "
                   f"(std {fmt(he)}).")
        findings.append(Finding(
            "saturated_activation", "warning",
            f"{fmt(100 * median)}% of the pre-activations of layer '{signals.layer_path(name)}' ({act}) lie outside "
            f"+-5 (threshold {fmt(100 * thresholds.saturated_fraction)}%), where the gradient is "
            "nearly zero." + why,
            where=signals.layer_path(name), **_at(signals, s, start),
            evidence=evidence,
            suggestion=("Normalize the inputs, use Glorot initialization with a smaller scale, "
                        f"add BatchNormalization before '{name}', or use ReLU-family activations."),
        ))
    return remark_when_improving(findings, signals, thresholds)
