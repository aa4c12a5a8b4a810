"""The one contract of tag names shared by the writer, the reader and the rules.

`tfguard.summary` writes these tags, `tfguard.events` reads them back and
`tfguard.diagnose` turns them into findings. Change a name here and all three
follow; never rename a published tag without keeping the old one readable.

Every summary is written at one global step: the optimizer's `iterations`
after the step (so epoch-end scalars sit at the step that ended the epoch).

Example:

>>> from tfguard import _tags
>>> _tags.train("loss"), _tags.val("accuracy"), _tags.grad_norm("dense_1")
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
INPUT_WAIT_FRACTION = "perf/input_wait_fraction"  # of a recorded step's wall time, spent waiting for its batch
CPU_WAIT_FRACTION = "perf/cpu_wait_fraction"  # of the threads' runnable time, spent waiting for a CPU

# -- namespaces: the first part of every tag ----------------------------------------
TRAIN = "train/"
VAL = "val/"
BATCH = "batch/"
OPTIMIZER = "optimizer/"
PERF = "perf/"
GRAD_NORM = "grad_norm/"
WEIGHT_NORM = "weight_norm/"
UPDATE_RATIO = "update_ratio/"
ZERO_GRAD_FRACTION = "zero_grad_fraction/"
ACTIVATION = "activation/"
DATA = "data/"
GUARD = "guard/"
HIST = "hist/"
CONFIG = "config/"
IMAGES = "images/"
SCALAR_NAMESPACES = (TRAIN, VAL, BATCH, OPTIMIZER, PERF, GRAD_NORM, WEIGHT_NORM, UPDATE_RATIO,
                     ZERO_GRAD_FRACTION, ACTIVATION, DATA, GUARD)
"""Every namespace of a scalar tfguard writes: a run holding one is a tfguard run."""
_KERAS_NOT_METRICS = {"learning_rate": LEARNING_RATE, "lr": LEARNING_RATE}


def from_keras_log(key: str) -> str:
    """The tag of an epoch-end Keras log entry, the one mapping writer, recorder and reader share.

    `val_<m>` is validation, `learning_rate` (what ReduceLROnPlateau and
    schedules add) is the optimizer's, anything else a training metric.

    Example:

    >>> from_keras_log("val_loss"), from_keras_log("learning_rate"), from_keras_log("accuracy")
    ('val/loss', 'optimizer/learning_rate', 'train/accuracy')
    """
    if key in _KERAS_NOT_METRICS:
        return _KERAS_NOT_METRICS[key]
    if key.startswith("val_"):
        return val(key[len("val_"):])
    return train(key)


KERAS_GUARD_VIOLATIONS = "guard_violations"  # violations of the epoch so far, in a guarded model's logs
KERAS_GUARD_SKIPPED = "guard_skipped"  # batches skipped in the epoch so far, in a guarded model's logs
KERAS_GUARD_LOGS = (KERAS_GUARD_VIOLATIONS, KERAS_GUARD_SKIPPED)
"""The firewall's counters in Keras logs: written as `guard/*` by the firewall, not as metrics."""


def from_keras_logs(logs, *, batch_level: bool = False) -> dict[str, float]:
    """Tag -> value of the numeric scalar entries of Keras logs, as the Logger writes them and the live recorder keeps them.

    Epoch logs are named by `from_keras_log`; batch logs become
    `batch/<name>`. The firewall's counters and anything that is not one
    number (text, arrays) are left out.

    Example:

    >>> from_keras_logs({"loss": 0.5, "val_loss": 0.7, "guard_skipped": 1, "note": "x"})
    {'train/loss': 0.5, 'val/loss': 0.7}
    >>> from_keras_logs({"loss": 0.5}, batch_level=True)
    {'batch/loss': 0.5}
    """
    values = {}
    for key, value in (logs or {}).items():
        if key in KERAS_GUARD_LOGS or getattr(value, "ndim", 0) != 0:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        values[batch(key) if batch_level else from_keras_log(key)] = number
    return values


def epoch_values(epoch: int, logs, learning_rate: float | None = None) -> dict[str, float]:
    """Tag -> value at an epoch end, as the Logger writes them and the live recorder keeps them.

    The epoch, Keras's epoch logs (`from_keras_logs`) and the optimizer's
    learning rate as it is now (after ReduceLROnPlateau or a schedule
    changed it, it overrides a `learning_rate` log entry).

    Example:

    >>> epoch_values(2, {"loss": 0.5, "learning_rate": 0.1}, learning_rate=0.05)
    {'train/epoch': 2.0, 'train/loss': 0.5, 'optimizer/learning_rate': 0.05}
    """
    values = {EPOCH: float(epoch), **from_keras_logs(logs)}
    if learning_rate is not None:
        values[LEARNING_RATE] = float(learning_rate)
    return values


def is_metric(tag: str) -> bool:
    """Whether a tag is a training or validation metric (the learning rate is not).

    Example:

    >>> is_metric("val/accuracy"), is_metric("optimizer/learning_rate")
    (True, False)
    """
    return tag.startswith((TRAIN, VAL)) and tag != EPOCH


def metric_name(tag: str) -> str:
    """The metric a `train/`, `val/` or `batch/` tag holds: `val/loss` -> `loss`."""
    for prefix in (TRAIN, VAL, BATCH):
        if tag.startswith(prefix):
            return tag[len(prefix):]
    return tag


def per_layer(namespace: str, tag: str) -> str | None:
    """The layer a per-layer tag names, or `None`: `per_layer(GRAD_NORM, "grad_norm/d1")` -> `"d1"`.

    Example:

    >>> per_layer(GRAD_NORM, "grad_norm/dense_1"), per_layer(GRAD_NORM, "grad_norm/global")
    ('dense_1', None)
    """
    if not tag.startswith(namespace):
        return None
    rest = tag[len(namespace):]
    if namespace == ACTIVATION:
        rest = rest.split("/", 1)[1] if "/" in rest else ""
    return rest if rest and rest != "global" else None

# -- training health, on the logger's scalar schedule ---------------------------
GLOBAL_GRAD_NORM = "grad_norm/global"


def grad_norm(layer: str) -> str:
    """L2 norm of all gradients of one layer's trainable variables."""
    return f"grad_norm/{layer}"


def optimizer_grad_norm(optimizer: str) -> str:
    """L2 norm of all gradients one optimizer applied in a step (a GAN's critic and generator apart)."""
    return f"optimizer/grad_norm/{optimizer}"


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
LABEL_ROW_SUM_MAX = "data/label_row_sum_max"  # rows of float targets: > 1 means multi-hot

# -- the firewall ---------------------------------------------------------------
GUARD_VIOLATIONS = "guard/violations"  # cumulative count
GUARD_SKIPPED = "guard/skipped"  # cumulative count
GUARD_EVENTS = "guard/events"  # text: one markdown line per violation
GUARD_RECORDS = "guard/records"  # text: one JSON object per violation (the rules' evidence)
GUARD_STAGES = ("data", "forward", "loss", "gradients", "update", "spike")
"""The firewall's check stages as a record names them (its "stage"), in the order a violation names
them (`spike`: `tfguard._firewall.spikes`, last: a value that overflowed is named as such, not as an outlier)."""
# -- invariants of a correct program (tfguard.invariants) ---------------------------
INVARIANT_RECORDS = "invariants/records"  # text: one JSON object per invariant check (ok or not)
TEXT_LOGS = (GUARD_EVENTS, GUARD_RECORDS, INVARIANT_RECORDS)
"""Text tags that log several values at one step (skipped batches, checks made after one step): read back all of them."""

# -- how the run ended ----------------------------------------------------------
RUN_STATUS = "run/status"  # text: JSON {"status", "error", "type", "step", "detail"} when it failed

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
CONFIG_PHASES = "config/phases"  # JSON list, one object per training phase (a model compiled again), at each new phase
IMAGES_INPUTS = "images/inputs"


def weight_image(variable: str) -> str:
    """A weight drawn as an image, as Keras's `write_images` does."""
    return f"images/weights/{variable}"
