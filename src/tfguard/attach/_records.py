"""What an attach session keeps: one `FitRecord` per `fit()` call, one `ModelState` per model.

A `FitRecord` is the result of one intercepted call (the run it belongs
to, its diagnosis, the firewall's events, the error it raised). A
`ModelState` is what the session did to one model and how to undo it: it
guards a model once (`take_model`), keeps the model's run, logger and live
diagnosis across its fits (a `fit(epochs=1)` in a loop is one training
history), and puts the model back as it found it (`restore_model`).

Example:

>>> import keras
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> record = FitRecord(run="", model=model.name, index=1)
>>> state = take_model(model, record, guard=True, policy="skip", forward="output",
...                    quarantine_dir=None)
>>> state.created, state.guarded
(True, True)
>>> restore_model(state)
>>> from tfguard._firewall import instrumentation_of
>>> instrumentation_of(model) is None
True
"""

from __future__ import annotations

import dataclasses

import keras

from tfguard._errors import TfguardError
from tfguard._firewall import GuardConfig, instrumentation_of, release
from tfguard._firewall import guard as guard_model
from tfguard.attach._phases import ModelPhases
from tfguard.diagnose import Diagnosis


@dataclasses.dataclass
class FitRecord:
    """One intercepted `fit()` call.

    Args:
        run: the run's name, `<model name>-fit<index>`.
        model: the model's name.
        index: the call's 1-based index in the session.
        diagnosis: the `Diagnosis` of the call's signals, or `None` when no
            live diagnosis could ride along (callbacks given as a
            `CallbackList`) or the diagnosis itself failed (see `notes`).
        guard_events: the firewall's `GuardEvent`s during the call, oldest first.
        run_dir: the folder the session's logger wrote, or `None`.
        guarded: whether the firewall was on for the call.
        error: `"<type>: <message>"` of the exception `fit` raised, or `None`.
        notes: remarks (a callback that could not be added, ...).
        kind: `"fit"`, or `"loop"` for a hand-written loop's run (`tfguard.attach._loops`),
            `"outside-fit"` for updates the firewall rejected outside any recorded run.
        phase: the training phase of the run the call belongs to (`tfguard.attach._phases`:
            one per `compile` of the model between its fits).
    """

    run: str
    model: str
    index: int
    diagnosis: Diagnosis | None = None
    guard_events: list = dataclasses.field(default_factory=list)
    run_dir: str | None = None
    guarded: bool = False
    error: str | None = None
    notes: list = dataclasses.field(default_factory=list)
    kind: str = "fit"
    phase: int = 1


@dataclasses.dataclass
class ModelState:
    """What a session did to one model, and what it keeps of the model across its fits."""

    model: keras.Model
    created: bool
    previous_guard: GuardConfig | None
    guarded: bool = False
    run: str | None = None  # one run per model: its fits continue one training history
    run_dir: str | None = None
    live: object = None  # the session's LiveDiagnosis of this model, kept across its fits
    logger: object = None  # the session's Logger of this model, kept across its fits
    phases: ModelPhases = dataclasses.field(default_factory=ModelPhases)  # one per compile between its fits


def take_model(model, record: FitRecord, *, guard: bool, policy: str, forward: str,
               quarantine_dir) -> ModelState:
    """Guards the model once (unless it is guarded already) and remembers how to put it back.

    Args:
        model: the model of the call.
        record: the call's record; a model the firewall cannot guard gets a note.
        guard: turn the firewall on.
        policy: the firewall's policy.
        forward: the firewall's forward stage.
        quarantine_dir: where the firewall saves bad batches.

    Returns:
        The model's `ModelState`.
    """
    inst = instrumentation_of(model)
    state = ModelState(model, created=inst is None,
                       previous_guard=inst.guard if inst is not None else None)
    if guard and (inst is None or inst.guard is None):
        try:
            guard_model(model, policy=policy, forward=forward, quarantine_dir=quarantine_dir)
        except TfguardError as error:  # the training goes on unguarded, as the script wrote it
            record.notes.append(f"the firewall could not guard '{record.model}': {error.message}")
        else:
            current = instrumentation_of(model)
            state.guarded = current is not None and current.guard is not None
    return state



def restore_model(state: ModelState) -> None:
    """Puts a model back: released if the session instrumented it, else its previous guard."""
    inst = instrumentation_of(state.model)
    if inst is None:
        return
    if state.created:
        release(state.model)
    elif state.guarded:
        inst.set_guard(state.previous_guard)


__all__ = ["FitRecord", "ModelState", "restore_model", "take_model"]
