"""The firewall uses the hooks and is never called back by them, on whole guarded trainings.

`lint-imports` keeps `tfguard.hooks` from importing `tfguard.firewall`; this
checks the run time: while a guarded `fit` traces and runs (the optimizer's
door, a gated update's dry run, the restore, the recording branches, a
`LossScaleOptimizer`'s nested apply, a GAN's two optimizers, an update
outside any step, a quarantined batch replayed, a hand-written loop's
`guard_step`, an eager and an XLA-compiled step, replicas under
MirroredStrategy), no function of the firewall's runs with a function of
the hooks' beneath it on the stack.
"""

from __future__ import annotations

import os
import sys
import textwrap
import threading

import keras
import numpy as np
import pytest

import tfguard
from tests.firewall import foreign, replicas
from tfguard.firewall import loop

_HOOKS = os.sep + os.path.join("tfguard", "hooks") + os.sep
_FIREWALL = os.sep + os.path.join("tfguard", "firewall") + os.sep


class _Calls:
    """Every call of a firewall function, and those with a hooks function beneath them."""

    def __init__(self):
        self.firewall: set[str] = set()
        self.called_back: list[str] = []

    def profile(self, frame, event, arg):
        if event != "call" or _FIREWALL not in frame.f_code.co_filename:
            return
        name = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}"
        self.firewall.add(name)
        below = frame.f_back
        while below is not None:
            if _HOOKS in below.f_code.co_filename:
                self.called_back.append(f"{name} under {os.path.basename(below.f_code.co_filename)}:"
                                        f"{below.f_code.co_name}")
                return
            below = below.f_back

    def run(self, fn):
        sys.setprofile(self.profile)
        threading.setprofile(self.profile)
        try:
            fn()
        finally:
            sys.setprofile(None)
            threading.setprofile(None)


def _one_way(train, *passed: str) -> _Calls:
    """Runs `train` profiled; asserts the firewall functions `passed` ran and none ran above a hooks function."""
    calls = _Calls()
    calls.run(train)
    assert set(passed) <= calls.firewall  # the door really ran: the check is not vacuous
    assert calls.called_back == []
    return calls


def _bad_batches(x, row=3):
    x = np.array(x, copy=True)
    x[row] = np.nan
    return x


def _guarded_fit_with_a_bad_batch(tmp_path, hold_bytes):
    model = foreign.bn_model()
    tfguard.guard(model, policy="skip", forward="layers", hold_bytes=hold_bytes,
                  quarantine_dir=str(tmp_path / "q"))
    seen = []
    tfguard.instrument(model).subscribe(seen.append, scalars_every=1, histograms_every=2, weights=True)
    x = np.random.default_rng(0).random((32, 4)).astype("float32")
    y = (np.arange(32) % 3).astype("int64")
    model.fit(_bad_batches(x), y, batch_size=8, epochs=1, verbose=0)
    return model, seen


@pytest.mark.parametrize("hold_bytes", [tfguard.firewall.config.HOLD_BYTES, 0], ids=["held", "gated"])
def test_a_guarded_recorded_fit_with_a_bad_batch_never_calls_the_firewall_from_the_hooks(tmp_path, hold_bytes):
    result = {}
    # the door, the step, the recording and the replay of the bad batch all ran
    calls = _one_way(lambda: result.update(zip(("model", "seen"), _guarded_fit_with_a_bad_batch(tmp_path, hold_bytes))),
                     "door.py:apply", "door.py:through_door", "step.py:train_step", "probes.py:record")
    assert tfguard.guard_events(result["model"]) and result["seen"]
    if hold_bytes == 0:
        assert "gate.py:__call__" in calls.firewall


@pytest.mark.parametrize("program", ["custom_step_mixed", "gan"])
def test_user_shaped_programs_never_call_the_firewall_from_the_hooks(program):
    # a LossScaleOptimizer's inner apply runs inside its own, through the door's write;
    # a GAN's two optimizers go through the door one after the other
    built = getattr(foreign, program)()
    model, data = built[0], built[1:]

    def train():
        tfguard.guard(model, policy="skip", quarantine_dir=None)
        model.fit(*data, batch_size=16, epochs=1, verbose=0)

    _one_way(train, "door.py:through_door")


def test_an_update_outside_any_step_never_calls_the_firewall_from_the_hooks():
    model = foreign.bn_model()
    grads = [keras.ops.ones_like(v) for v in model.trainable_variables]

    def train():
        loop.gate_optimizers()
        try:
            model.optimizer.apply(grads, model.trainable_variables)
        finally:
            loop.ungate_optimizers()

    _one_way(train, "loop.py:through_door")


@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_an_eager_and_an_xla_step_never_call_the_firewall_from_the_hooks(mode):
    model = foreign.bn_model(jit_compile=mode == "xla")
    model.run_eagerly = mode == "eager"
    x = np.random.default_rng(0).random((32, 4)).astype("float32")
    y = (np.arange(32) % 3).astype("int64")

    def train():
        tfguard.guard(model, policy="skip", quarantine_dir=None)
        model.fit(_bad_batches(x), y, batch_size=8, epochs=1, verbose=0)

    _one_way(train, "door.py:through_door")


def test_a_hand_written_loops_guarded_step_never_calls_the_firewall_from_the_hooks():
    model = foreign.bn_model()
    train_step = foreign.loop_step(model, model.optimizer, keras.losses.SparseCategoricalCrossentropy())
    x = np.random.default_rng(0).random((8, 4)).astype("float32")
    y = (np.arange(8) % 3).astype("int64")

    def train():
        step = tfguard.guard_step(train_step, model, policy="skip", quarantine_dir=None)
        step(x, y)
        step(_bad_batches(x), y)

    _one_way(train, "door.py:through_door")


REPLICAS = textwrap.dedent(
    """
    from tests.hooks.test_one_way import _one_way
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(3, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x = np.random.default_rng(0).random((32, 4), dtype=np.float32)
    x[5, 0] = np.nan
    y = np.arange(32) % 3

    def train():
        tfguard.guard(model, policy="skip", quarantine_dir=None)
        model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)

    _one_way(train, "door.py:through_door")
    print("ONE WAY")
    """
)


def test_replicas_under_mirrored_strategy_never_call_the_firewall_from_the_hooks():
    # replicas trace their steps in threads of their own: the profile follows them (threading.setprofile)
    result = replicas.run(REPLICAS)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ONE WAY" in result.stdout
