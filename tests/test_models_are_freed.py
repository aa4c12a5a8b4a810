"""A model tfguard guarded, logged or watched is freed once the program drops it.

A sweep, a notebook or a script that trains model after model in one
process keeps only the models it holds: tfguard keeps what it attached to a
model on the model itself (its instrumentation, its patches, its invariant
watch, a `tfguard run` session's state), never in a registry that would
outlive it. Before, every guarded or logged model stayed alive with its
weights and traces until the process ended (a registry keyed weakly by the
model whose value referred to it).
"""

from __future__ import annotations

import gc
import weakref

import keras
import numpy as np
import pytest

import tfguard
from tests.conftest import mse_step
from tfguard.attach import attached
from tfguard.diagnose import LiveDiagnosis
from tfguard.events import read_run

X = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
Y = X[:, :1] * 2.0
MODELS = 3


def _model() -> keras.Model:
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    return model


def _guarded(tmp_path, model):
    tfguard.guard(model, policy="skip", quarantine_dir=str(tmp_path / "quarantine"))
    model.fit(X, Y, batch_size=8, verbose=0)


def _logged(tmp_path, model):
    model.fit(X, Y, batch_size=8, verbose=0, callbacks=[tfguard.Logger(str(tmp_path / "runs")), LiveDiagnosis()])


def _guarded_step(tmp_path, model):
    guarded = tfguard.guard_step(mse_step(model, keras.optimizers.Adam()), model, policy="skip", quarantine_dir=None)
    for _ in range(3):
        guarded(X, Y)


@pytest.fixture(autouse=True)
def _earlier_objects_frozen():
    """What earlier tests left is out of this test's collections (`gc.freeze`), and back in after it.

    In the suite a worker's heap holds a few GB of what TensorFlow keeps of
    every traced model, and each full collection here walked all of it
    (this file's collections took 67 s of its 81 s in a full run,
    benchmarks/HISTORY.md, ninth session). A frozen object still holds
    what it refers to: a registry that kept a model would keep it as before.
    """
    gc.freeze()
    yield
    gc.unfreeze()


def _collect() -> None:
    """Full collections until one frees nothing more (finalizers may free what the previous one kept)."""
    for _ in range(5):
        if gc.collect() == 0:
            return


def _trained(tmp_path, train) -> list[weakref.ref]:
    """Trains `MODELS` models one after the other, as a sweep does, keeping none of them."""
    kept = []
    for _ in range(MODELS):
        model = _model()
        train(tmp_path, model)
        kept.append(weakref.ref(model))
    return kept


@pytest.mark.parametrize("train", [_guarded, _logged, _guarded_step], ids=["guard", "logger_and_live", "guard_step"])
def test_each_model_of_a_sweep_is_freed_once_dropped(tmp_path, train):
    kept = _trained(tmp_path, train)
    _collect()
    assert [ref() is None for ref in kept] == [True] * MODELS


def test_a_tfguard_run_session_frees_the_models_the_script_drops_and_ends_their_runs(tmp_path):
    with attached(logdir=str(tmp_path / "runs"), policy="skip") as session:
        kept = _trained(tmp_path, lambda _, model: model.fit(X, Y, batch_size=8, verbose=0))
        _collect()
        alive = [ref() is not None for ref in kept]
        held = _model()
        held.fit(X, Y, batch_size=8, verbose=0)
    assert alive == [False] * MODELS
    assert len(session.fits) == MODELS + 1
    for fit in session.fits:  # every run ended and was diagnosed, the dropped models' too
        assert "run/status" in read_run(fit.run_dir).texts and fit.diagnosis is not None
    assert "_tfguard_attach_state" not in vars(held) and not tfguard.guard_events(held)
