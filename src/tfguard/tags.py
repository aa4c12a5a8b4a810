"""The one contract of tag names shared by the writer, the reader and the rules.

`tfguard.summary` writes these tags, `tfguard.events` reads them back and
`tfguard.diagnose` turns them into findings. Change a name here and all three
follow; never rename a published tag without keeping the old one readable.

Every summary is written at one global step: the optimizer's `iterations`
after the step (so epoch-end scalars sit at the step that ended the epoch).

Example:

>>> from tfguard import tags
>>> tags.train("loss"), tags.val("accuracy"), tags.grad_norm("dense_1")
('train/loss', 'val/accuracy', 'grad_norm/dense_1')
"""

from __future__ import annotations

PLUGIN_VERSION = 1

# -- scalars, per epoch ---------------------------------------------------------
EPOCH = "train/epoch"  # the epoch index (0-based) at its last step


def train(metric: str) -> str:
    """Epoch-end training metric, e.g. `train/loss`."""
    return f"train/{metric}"


def val(metric: str) -> str:
    """Epoch-end validation metric, e.g. `val/loss`."""
    return f"val/{metric}"


def batch(metric: str) -> str:
    """Per-batch training metric on the logger's schedule, e.g. `batch/loss`."""
    return f"batch/{metric}"


LEARNING_RATE = "optimizer/learning_rate"
STEPS_PER_SECOND = "perf/steps_per_second"

# -- training health, on the logger's scalar schedule ---------------------------
GLOBAL_GRAD_NORM = "grad_norm/global"


def grad_norm(layer: str) -> str:
    """L2 norm of all gradients of one layer's trainable variables."""
    return f"grad_norm/{layer}"


def weight_norm(layer: str) -> str:
    """L2 norm of one layer's trainable variables."""
    return f"weight_norm/{layer}"


def update_ratio(layer: str) -> str:
    """||w_after - w_before|| / ||w_before|| of one layer over one step."""
    return f"update_ratio/{layer}"


def zero_grad_fraction(layer: str) -> str:
    """Fraction of one layer's gradient entries that are exactly zero."""
    return f"zero_grad_fraction/{layer}"


def dead_fraction(layer: str) -> str:
    """Fraction of a ReLU-family layer's units that are <= 0 for the whole batch."""
    return f"activation/dead_fraction/{layer}"


def saturated_fraction(layer: str) -> str:
    """Fraction of a sigmoid/tanh layer's pre-activations outside +-5."""
    return f"activation/saturated_fraction/{layer}"


# Statistics of the batch fed to the model (first input) and its labels.
INPUT_MIN = "data/input_min"
INPUT_MAX = "data/input_max"
INPUT_MEAN = "data/input_mean"
INPUT_STD = "data/input_std"
LABEL_MIN = "data/label_min"
LABEL_MAX = "data/label_max"

# -- the firewall ---------------------------------------------------------------
GUARD_VIOLATIONS = "guard/violations"  # cumulative count
GUARD_SKIPPED = "guard/skipped"  # cumulative count
GUARD_EVENTS = "guard/events"  # text: one markdown line per violation

# -- histograms -----------------------------------------------------------------


def hist_weights(variable: str) -> str:
    return f"hist/weights/{variable}"


def hist_gradients(variable: str) -> str:
    return f"hist/gradients/{variable}"


def hist_activations(layer: str) -> str:
    return f"hist/activations/{layer}"


# -- text and images --------------------------------------------------------------
CONFIG_HPARAMS = "config/hparams"  # markdown table
CONFIG_MODEL = "config/model"  # JSON: layers, activations, output activation, loss
CONFIG_LINT = "config/lint"  # JSON list of static (lint) findings at train start
IMAGES_INPUTS = "images/inputs"
