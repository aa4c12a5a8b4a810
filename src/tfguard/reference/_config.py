"""The configuration of a training run: `TrainConfig`, and `load_config` from TOML.

`TrainConfig` is every choice a run depends on, validated when it is made
(each error names the field, the expectation and the value received). A
config comes from code, or from a TOML file (top-level keys or a `[train]`
table) with command-line flags on top (`load_config`); `hparams()` and
`run_dir()` derive the run's hyperparameters and its directory, so the same
config always finds its own run. Running it is `tfguard.reference._train`'s job.

Example:

>>> config = TrainConfig(data="npz:data/mine.npz", learning_rate=0.01, seed=3)
>>> config.run_dir().name
'npz-mine-cnn-adam-lr0.01-bs64-aug0-s3'
>>> config.replace(epochs=2, batch_size=None).epochs
2
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Mapping
from pathlib import Path

from tfguard._errors import ContractError
from tfguard.reference._models import MODELS, OPTIMIZERS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["TrainConfig", "load_config"]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on.

    Load one from TOML with `load_config` (top-level keys or a `[train]`
    table); command-line flags override the file.

    Example:

    >>> TrainConfig(learning_rate=0.01, augment=True).hparams()
    {'model': 'cnn', 'optimizer': 'adam', 'learning_rate': 0.01, 'batch_size': 64, 'augment': True}

    Args:
        data: dataset spec, see `load_data`. Defaults to `"digits"`.
        model: `"cnn"` or `"mlp"`. Defaults to `"cnn"`.
        epochs: maximum number of epochs. Defaults to `10`.
        batch_size: examples per batch. Defaults to `64`.
        learning_rate: initial learning rate. Defaults to `0.001`.
        optimizer: `"adam"`, `"adamw"`, `"sgd"` or `"rmsprop"`. Defaults to `"adam"`.
        augment: random crop (and flip where labels allow) on training
            batches. Defaults to `False`.
        seed: seed of weights, shuffling and augmentation. Defaults to `0`.
        logdir: root folder of run directories. Defaults to `"runs"`.
        export_dir: where `train` exports the model after training, or
            `None` to not export. Defaults to `None`.
        patience: epochs without `val_loss` improvement before early
            stopping. Defaults to `3`.
        lr_patience: epochs without improvement before the learning rate is
            multiplied by `lr_factor`. Defaults to `2`.
        lr_factor: factor of `ReduceLROnPlateau`. Defaults to `0.5`.
        val_fraction: share of the training data held out for validation
            (0 monitors the training loss instead). Defaults to `0.1`.
        max_samples: cap on train and test examples, or `None`. Defaults to `None`.
        run_name: the run directory's name, or `None` to derive it from the
            data and hparams. Defaults to `None`.
    """

    data: str = "digits"
    model: str = "cnn"
    epochs: int = 10
    batch_size: int = 64
    learning_rate: float = 1e-3
    optimizer: str = "adam"
    augment: bool = False
    seed: int = 0
    logdir: str = "runs"
    export_dir: str | None = None
    patience: int = 3
    lr_patience: int = 2
    lr_factor: float = 0.5
    val_fraction: float = 0.1
    max_samples: int | None = None
    run_name: str | None = None

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Checks every field.

        Raises:
            ContractError: naming the field, the expectation and the value.
        """

        def bad(field, expected):
            value = getattr(self, field)
            raise ContractError(
                f"Received an invalid value for `{field}`, expected {expected}. "
                f"Received: {field}={value!r}"
            )

        def is_int(v):
            return isinstance(v, int) and not isinstance(v, bool)

        def is_num(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        if not isinstance(self.data, str) or not self.data:
            bad("data", "a dataset spec such as 'digits' or 'npz:PATH'")
        if self.model not in MODELS:
            bad("model", f"one of {sorted(MODELS)}")
        if self.optimizer not in OPTIMIZERS:
            bad("optimizer", f"one of {sorted(OPTIMIZERS)}")
        for field in ("epochs", "batch_size"):
            if not is_int(getattr(self, field)) or getattr(self, field) <= 0:
                bad(field, "a positive integer")
        for field in ("patience", "lr_patience", "seed"):
            if not is_int(getattr(self, field)) or getattr(self, field) < 0:
                bad(field, "a non-negative integer")
        if not is_num(self.learning_rate) or self.learning_rate <= 0:
            bad("learning_rate", "a positive float")
        if not is_num(self.lr_factor) or not 0 < self.lr_factor < 1:
            bad("lr_factor", "a float in (0, 1)")
        if not is_num(self.val_fraction) or not 0 <= self.val_fraction < 1:
            bad("val_fraction", "a float in [0, 1)")
        if not isinstance(self.augment, bool):
            bad("augment", "true or false")
        if self.max_samples is not None and (not is_int(self.max_samples) or self.max_samples <= 0):
            bad("max_samples", "a positive integer or None")
        if not isinstance(self.logdir, str) or not self.logdir:
            bad("logdir", "a folder path")
        if self.export_dir is not None and (
            not isinstance(self.export_dir, str) or not self.export_dir
        ):
            bad("export_dir", "a folder path or None")
        if self.run_name is not None and (
            not isinstance(self.run_name, str) or not self.run_name or "/" in self.run_name
        ):
            bad("run_name", "a folder name without '/'")

    def hparams(self) -> dict:
        """The hyperparameters that define the run (for the run name and the HParams tab).

        Returns:
            `{"model", "optimizer", "learning_rate", "batch_size", "augment"}`.
        """
        return {
            "model": self.model,
            "optimizer": self.optimizer,
            "learning_rate": float(self.learning_rate),
            "batch_size": self.batch_size,
            "augment": self.augment,
        }

    def run_dir(self) -> Path:
        """The run directory: `logdir/run_name`, where the default name is
        `<data>-<model>-<optimizer>-lr<lr>-bs<batch>-aug<0|1>-s<seed>`."""
        if self.run_name:
            return Path(self.logdir) / self.run_name
        kind, _, arg = self.data.partition(":")
        data = f"{kind}-{Path(arg).stem or Path(arg).name}" if arg else kind
        h = self.hparams()
        name = (
            f"{data}-{h['model']}-{h['optimizer']}-lr{h['learning_rate']:g}"
            f"-bs{h['batch_size']}-aug{int(h['augment'])}-s{self.seed}"
        )
        return Path(self.logdir) / name

    def to_dict(self) -> dict:
        """All fields as a dict (what `load_config` reads back)."""
        return dataclasses.asdict(self)

    def replace(self, **overrides) -> TrainConfig:
        """A copy with `overrides` applied; `None` values are ignored (flags not given).

        Raises:
            ContractError: an unknown field or an invalid value.
        """
        _check_keys(overrides, "override")
        given = {k: v for k, v in overrides.items() if v is not None}
        return dataclasses.replace(self, **_coerce(given))


def _check_keys(mapping: Mapping, what: str) -> None:
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(mapping) - fields)
    if unknown:
        raise ContractError(
            f"Received unknown {what} key(s) {unknown}, expected some of {sorted(fields)}."
        )


def _coerce(values: dict) -> dict:
    """TOML and flags may give `1` for a float field."""
    out = dict(values)
    for field in ("learning_rate", "lr_factor", "val_fraction"):
        v = out.get(field)
        if isinstance(v, int) and not isinstance(v, bool):
            out[field] = float(v)
    return out


def load_config(path: str | Path | None = None, **overrides) -> TrainConfig:
    """Loads a `TrainConfig` from a TOML file, then applies flag overrides.

    Example:

    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "train.toml"
    >>> _ = p.write_text('[train]\\nepochs = 3\\nlearning_rate = 0.01\\n')
    >>> load_config(p, epochs=5, batch_size=None).epochs
    5

    Args:
        path: a TOML file with top-level keys or a `[train]` table, or `None`
            for the defaults. Defaults to `None`.
        **overrides: field values that win over the file; `None` means "not
            given".

    Returns:
        A validated `TrainConfig`.

    Raises:
        ContractError: the file is missing or not TOML, or has unknown keys
            or invalid values.
    """
    values: dict = {}
    if path is not None:
        path = Path(path)
        try:
            with path.open("rb") as f:
                doc = tomllib.load(f)
        except FileNotFoundError as e:
            raise ContractError(f"The config file {str(path)!r} does not exist.") from e
        except tomllib.TOMLDecodeError as e:
            raise ContractError(f"The config file {str(path)!r} is not valid TOML: {e}") from e
        values = doc.get("train", doc) if isinstance(doc.get("train"), dict) else doc
        _check_keys(values, f"config ({path})")
    return TrainConfig(**_coerce(values)).replace(**overrides)
