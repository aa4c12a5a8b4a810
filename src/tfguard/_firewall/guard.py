"""`tfguard.guard(model)`: the quality firewall in one call.

Example:

>>> import keras, numpy as np, tfguard
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
>>> model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
>>> model = tfguard.guard(model, policy="skip")
>>> history = model.fit(np.random.rand(32, 4), np.arange(32) % 3, verbose=0)
>>> history.history["guard_violations"]
[0.0]
"""

from __future__ import annotations

import keras

from tfguard._errors import ContractError
from tfguard._firewall.config import (
    DEFAULT_QUARANTINE,
    HOLD_BYTES,
    GuardConfig,
    enabled_by_environment,
)
from tfguard._firewall.instrument import instrument, instrumentation_of


def guard(
    model: keras.Model,
    *,
    policy: str = "raise",
    forward: str = "output",
    data="infer",
    quarantine_dir: str | None = DEFAULT_QUARANTINE,
    max_consecutive_skips: int = 10,
    max_quarantined: int = 5,
    localize: bool = True,
    hold_bytes: int = HOLD_BYTES,
    spikes=False,
    enabled: bool | None = None,
) -> keras.Model:
    """Guards a Keras model's training: every step checked, a bad one leaves nothing behind.

    The model's own `train_step` (Keras's, or an override: a GAN with two
    optimizers, a VAE compiled without a loss) runs unchanged inside the
    guard. Every `fit()` (and `train_on_batch`) step then checks the batch
    (data), the model outputs or every layer's output (forward), the loss,
    every non-None gradient handed to an optimizer (gradients) and every
    weight, moving statistic and optimizer variable after the step
    (update). A rejected step is rolled back as a whole: weights, optimizer
    slots and iterations, BatchNormalization statistics, metric states and
    seed generators are bitwise what they were. On a violation the batch is
    quarantined and localized, and the policy acts. Works for Sequential,
    functional and subclassed models, before or after `compile`, with
    `jit_compile=True` (XLA) and under `tf.distribute` strategies. `fit`'s
    History gets `guard_violations` and `guard_skipped` per epoch. For a
    hand-written loop, see `guard_step`.

    Off means off: with `enabled=False`, or the environment variable
    `TFGUARD=0`, the model is returned untouched and its train function has
    exactly the ops of an unguarded model.

    Example:

    >>> import keras, tfguard
    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> tfguard.guard(m, enabled=False) is m
    True

    Args:
        model: the model to guard (the same object is returned).
        policy: `"raise"`, `"skip"` or `"warn"` (see `GuardConfig`). Defaults to `"raise"`.
        forward: `"output"`, `"layers"` or `"off"`. Defaults to `"output"`.
        data: a `tfguard.checks.Contract`, `"infer"` or `None`. Defaults to `"infer"`.
        quarantine_dir: where bad batches go; `None` keeps none. Defaults to
            `"tfguard-quarantine"`.
        max_consecutive_skips: stop after this many skips in a row. Defaults to `10`.
        max_quarantined: quarantine at most this many batches. Defaults to `5`.
        localize: replay a bad batch to name the first bad layer/variable/op
            before raising. Defaults to `True`.
        hold_bytes: the most state of an optimizer update the guard keeps
            alive to decide on it: such an update is computed, checked and
            then written (or held and rolled back, where its values cannot
            be computed ahead); a larger one is checked before it is written
            and computed again to write it, at no memory cost
            (`tfguard._firewall.gate`). Defaults to 32 MiB.
        spikes: also reject a step whose loss or global gradient norm is an
            outlier (a spike) against the last accepted steps, in the graph
            (`tfguard._firewall.spikes`): `True` for OLMo-core's rule (above
            mean + 6 std of the last 128 steps, acting after 64), a
            `SpikeConfig` or a mapping of its fields (`window`, `sigmas`,
            `warmup`, `signals`). Guarding the model again starts the window
            over. Defaults to `False`.
        enabled: `False` turns the guard off; `None` reads `TFGUARD`. Defaults to `None`.

    Returns:
        The same model, guarded.

    Raises:
        ContractError: for an invalid option or something that is not a Keras model.
    """
    if not isinstance(model, keras.Model):
        raise ContractError(
            f"Received an invalid value for `model`, expected a keras.Model. Received: {type(model).__name__}"
        )
    config = GuardConfig(
        policy=policy,
        forward=forward,
        data=data,
        quarantine_dir=None if quarantine_dir is None else str(quarantine_dir),
        max_consecutive_skips=max_consecutive_skips,
        max_quarantined=max_quarantined,
        localize=localize,
        hold_bytes=hold_bytes,
        spikes=spikes,
    )
    if enabled is None:
        enabled = enabled_by_environment()
    if not enabled:
        return model
    instrument(model).set_guard(config)
    return model


def unguard(model: keras.Model) -> keras.Model:
    """Turns the firewall off (signals requested by a logger keep flowing).

    Example:

    >>> import keras, tfguard
    >>> m = tfguard.guard(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]))
    >>> tfguard.unguard(m) is m
    True
    """
    inst = instrumentation_of(model)
    if inst is not None:
        inst.set_guard(None)
    return model


def guard_events(model: keras.Model) -> list:
    """The violations seen on this model so far (`GuardEvent`s), oldest first."""
    inst = instrumentation_of(model)
    return list(inst.events) if inst is not None else []
