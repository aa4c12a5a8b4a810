"""The diagnosis rules, one per symptom id, all pure functions over `Signals`.

`RULES` maps each symptom id to its `Rule`, in the order reports list them.
Pass a subset of ids (or your own `Rule` objects) to `diagnose(rules=...)`.

Example:

>>> from tfguard.diagnose._rules import RULES
>>> list(RULES)[:3]
['nonfinite', 'exploding_gradient', 'vanishing_gradient']
"""

from __future__ import annotations

from tfguard.diagnose._rules.activations import dead_relu, saturated_activation
from tfguard.diagnose._rules.base import Rule
from tfguard.diagnose._rules.contract import loss_activation_mismatch
from tfguard.diagnose._rules.data import label_range, pipeline_order, unnormalized_input
from tfguard.diagnose._rules.firewall import bad_record
from tfguard.diagnose._rules.gradients import exploding_gradient, vanishing_gradient
from tfguard.diagnose._rules.invariants import (
    batch_dependence,
    collapsed_output,
    labels_ignored,
    trained_unused,
    training_mode_leak,
    untrained_variable,
)
from tfguard.diagnose._rules.loss_curve import (
    no_learning,
    oscillating_loss,
    overfitting,
    slow_convergence,
)
from tfguard.diagnose._rules.numeric import nonfinite
from tfguard.diagnose._rules.optimizer import learning_rate
from tfguard.diagnose._rules.pipeline import input_bound, python_in_pipeline
from tfguard.diagnose._rules.spikes import loss_spike

RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        Rule("nonfinite", nonfinite, "losses, metrics, gradient/weight norms; guard/events",
             after_death=True),
        Rule("exploding_gradient", exploding_gradient,
             "grad_norm/<layer>, grad_norm/global; config/model initializers and batch/loss",
             after_death=True),
        Rule("vanishing_gradient", vanishing_gradient, "grad_norm/<layer> of 2+ layers"),
        Rule("dead_relu", dead_relu, "activation/dead_fraction/<layer> or zero_grad_fraction/<layer>"),
        Rule("saturated_activation", saturated_activation, "activation/saturated_fraction/<layer>"),
        Rule("oscillating_loss", oscillating_loss, "train/loss per epoch or batch/loss"),
        Rule("slow_convergence", slow_convergence, "train/loss per epoch, an initial loss"),
        Rule("no_learning", no_learning, "train/loss per epoch"),
        Rule("overfitting", overfitting, "train/loss and val/loss per epoch"),
        Rule("loss_activation_mismatch", loss_activation_mismatch, "config/model"),
        Rule("unnormalized_input", unnormalized_input, "data/input_std, data/input_mean"),
        Rule("label_range", label_range, "data/label_min, data/label_max, config/model"),
        Rule("pipeline_order", pipeline_order, "config/lint or data/label_min, data/label_max"),
        Rule("learning_rate", learning_rate, "batch/loss or train/loss, update_ratio/<layer>",
             after_death=True),
        Rule("input_bound", input_bound, "perf/input_wait_fraction, config/lint"),
        Rule("python_in_pipeline", python_in_pipeline, "config/lint"),
        Rule("labels_ignored", labels_ignored, "invariants/records", after_death=True),
        Rule("untrained_variable", untrained_variable, "invariants/records", after_death=True),
        Rule("trained_unused", trained_unused, "invariants/records", after_death=True),
        Rule("batch_dependence", batch_dependence, "invariants/records", after_death=True),
        Rule("training_mode_leak", training_mode_leak, "invariants/records", after_death=True),
        Rule("collapsed_output", collapsed_output, "invariants/records", after_death=True),
        Rule("bad_record", bad_record, "guard/records"),
        Rule("loss_spike", loss_spike, "guard/records of the spike stage, or batch/loss",
             new_evidence=False),
    )
}

__all__ = ["RULES", "Rule"]
