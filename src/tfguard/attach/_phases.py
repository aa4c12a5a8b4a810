"""Training phases: the fits of one model between two `compile` calls.

Fine-tuning after transfer learning compiles a model twice: its head is
trained with the base frozen, then everything with a new optimizer and a
lower learning rate. Under `tfguard run` a model's fits are one run;
`ModelPhases` tells, at each fit, whether a new phase starts (the model's
optimizer or its number of trainable variables is not the last fit's) and
what it is: its optimizer, learning rate, trainable variables and
parameters, and the run's step of its first update. A new optimizer counts
its steps from its own start (0), so the run's steps go on from where the
last phase ended: `offset` is what the logger and the live diagnosis add to
the optimizer's count (`Logger.begin_phase`, `LiveDiagnosis.begin_phase`).

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.Dense(1)], name="m")
>>> model.layers[0].trainable = False
>>> model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
>>> phases = ModelPhases()
>>> phases.enter(model)
False
>>> _ = model.fit(np.ones((12, 3)), np.ones((12, 1)), batch_size=4, verbose=0)
>>> model.layers[0].trainable = True
>>> model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="mse")
>>> phases.enter(model), phases.offset
(True, 3)
>>> [(p["phase"], p["first_step"], p["learning_rate"], p["trainable_variables"]) for p in phases.rows()]
[(1, 1, 0.01, 2), (2, 4, 0.0001, 4)]
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfguard._optimizer_state import learning_rate, optimizer_step


@dataclasses.dataclass
class Phase:
    """One phase: what the model trained with between two compiles.

    Args:
        phase: its 1-based index in the run.
        first_step: the run's step of its first update.
        optimizer: the optimizer's class name.
        learning_rate: its learning rate when the phase began (`None` when it has none to read).
        trainable_variables: the model's trainable variables then.
        trainable_parameters: the numbers they hold.
    """

    phase: int
    first_step: int
    optimizer: str
    learning_rate: float | None
    trainable_variables: int
    trainable_parameters: int


def _rate(optimizer) -> float | None:
    value = learning_rate(optimizer)
    return float(f"{value:.7g}") if value is not None and np.isfinite(value) else None


class ModelPhases:
    """The phases of one model's run, and the offset its steps carry in the current one."""

    def __init__(self):
        self.phases: list[Phase] = []
        self.offset = 0
        self._key: tuple | None = None
        self._optimizer = None

    def enter(self, model) -> bool:
        """Counts a fit of `model`; whether it begins a new phase (the model was compiled again).

        A new phase goes on from the run's last step so far (`run_step`).
        """
        optimizer = getattr(model, "optimizer", None)
        trainable = list(model.trainable_variables)
        key = (id(optimizer), len(trainable))
        if self.phases and key == self._key:
            return False
        count = optimizer_step(optimizer) if optimizer is not None else 0
        if self.phases:
            self.offset = self.run_step() - count
        self.phases.append(Phase(
            phase=len(self.phases) + 1, first_step=self.offset + count + 1,
            optimizer=type(optimizer).__name__ if optimizer is not None else "none",
            learning_rate=_rate(optimizer) if optimizer is not None else None,
            trainable_variables=len(trainable),
            trainable_parameters=int(sum(int(np.prod(v.shape)) for v in trainable))))
        self._key, self._optimizer = key, optimizer
        return len(self.phases) > 1

    def run_step(self) -> int:
        """The run's step now: the current phase's offset plus its optimizer's count."""
        count = optimizer_step(self._optimizer) if self._optimizer is not None else 0
        return self.offset + count

    def rows(self) -> list[dict]:
        """Each phase as a dict (`tfguard.diagnose.Diagnosis.phases`)."""
        return [dataclasses.asdict(p) for p in self.phases]


__all__ = ["ModelPhases", "Phase"]
