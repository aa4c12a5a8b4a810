"""What the firewall checks and what it does about a violation.

Example:

>>> config = GuardConfig(policy="skip", forward="layers")
>>> config.policy, config.forward
('skip', 'layers')
"""

from __future__ import annotations

import dataclasses
import os

from tfguard._errors import ContractError
from tfguard._firewall.spikes import SpikeConfig, spike_config
from tfguard.checks import Contract

POLICIES = ("raise", "skip", "warn")
FORWARD_MODES = ("output", "layers", "off")
DEFAULT_QUARANTINE = "tfguard-quarantine"
ENV_SWITCH = "TFGUARD"
HOLD_BYTES = 32 * 2**20
"""Updates of at most this much state are held (a copy); larger ones are checked before they are written."""


def enabled_by_environment() -> bool:
    """False when the environment variable `TFGUARD` is `0`, `false`, `off` or `no`."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "off", "no")


@dataclasses.dataclass
class GuardConfig:
    """The firewall's settings.

    Args:
        policy: on a violation, `"raise"` (stop with `GuardViolation`), `"skip"`
            (do not apply the update, keep training) or `"warn"` (a warning;
            the update is applied unless the loss or a gradient is non-finite,
            which would poison the weights). Defaults to `"raise"`.
        forward: `"output"` checks the model's outputs every step, `"layers"`
            the output of every layer, `"off"` none. Defaults to `"output"`.
        data: a `tfguard.checks.Contract`, `"infer"` (inputs finite, labels
            against the output units and the loss) or `None`. Defaults to `"infer"`.
        quarantine_dir: where bad batches are saved; `None` saves none.
            Defaults to `"tfguard-quarantine"` under the working directory.
        max_consecutive_skips: with `"skip"`, stop after this many skipped
            steps in a row. Defaults to `10`.
        max_quarantined: try to save at most this many bad batches per model
            (a save that fails, on a full disk, counts). Defaults to `5`.
        localize: replay a quarantined batch to name the first bad layer,
            variable and op before raising. Defaults to `True`.
        hold_bytes: an optimizer update whose state (its variables and the
            optimizer's slots) is at most this many bytes is held and put
            back when the step is rejected (it costs a copy of that state);
            a larger one is checked before it is written and applied only
            when the step is accepted (`tfguard._firewall.gate`), at no
            memory cost. `0` checks every update before it is written.
            Defaults to `32 MiB`.
        spikes: also reject a step whose loss or gradient norm is a spike
            (`tfguard._firewall.spikes`): `True` for the defaults, a
            `SpikeConfig` or a mapping of its fields; `None` or `False` off.
            Defaults to `None`.
    """

    policy: str = "raise"
    forward: str = "output"
    data: Contract | str | None = "infer"
    quarantine_dir: str | None = DEFAULT_QUARANTINE
    max_consecutive_skips: int = 10
    max_quarantined: int = 5
    localize: bool = True
    hold_bytes: int = HOLD_BYTES
    spikes: SpikeConfig | None = None

    def __post_init__(self):
        self.spikes = spike_config(self.spikes)
        if self.policy not in POLICIES:
            raise ContractError(
                f"Received an invalid value for `policy`, expected one of {POLICIES}. "
                f"Received: policy={self.policy!r}"
            )
        if self.forward not in FORWARD_MODES:
            raise ContractError(
                f"Received an invalid value for `forward`, expected one of {FORWARD_MODES}. "
                f"Received: forward={self.forward!r}"
            )
        if not (self.data is None or self.data == "infer" or isinstance(self.data, Contract)):
            raise ContractError(
                "Received an invalid value for `data`, expected a tfguard.checks.Contract, "
                f"'infer' or None. Received: data={self.data!r}"
            )
        if self.quarantine_dir is None:
            self.max_quarantined = 0
        for name in ("max_consecutive_skips", "max_quarantined", "hold_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ContractError(
                    f"Received an invalid value for `{name}`, expected a non-negative integer. "
                    f"Received: {name}={value!r}"
                )
