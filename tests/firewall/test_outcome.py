"""`StepOutcome`: the one frozen value a step hands its consumers (the policy, the bus, Keras's logs).

Built by the host from a real guarded step in graph mode: a one-layer model
fits three batches of four rows, the second with a NaN, under `skip`, with a
listener of every step's scalars. Every consumer reads the same value, and
nothing of it can change.
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfguard
from tests.conftest import mse_step
from tfguard import _tags
from tfguard._firewall.host import HostLoop
from tfguard._firewall.instrument import instrument
from tfguard._firewall.outcome import StepOutcome

SLOTS = ["data: x", "data: y", "forward: model output", "loss: loss",
         "gradients: gradient of 'fitted/out/kernel'", "gradients: gradient of 'fitted/out/bias'",
         "update: update of 'fitted/out/kernel'", "update: update of 'fitted/out/bias'",
         "update: update of 'sgd/learning_rate'"]


@pytest.fixture(scope="module")
def fitted():
    """Three steps of a guarded, listened-to fit (the second batch has a NaN), and what each consumer got."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="out")], name="fitted")
    model.compile(optimizer=keras.optimizers.SGD(0.1, name="sgd"), loss="mse")
    assert not model.run_eagerly
    tfguard.guard(model, policy="skip", quarantine_dir=None, localize=False)
    inst = instrument(model)
    records, to_policy, to_bus = [], [], []
    inst.subscribe(records.append, scalars_every=1)
    handle = inst.enforcer.handle

    def policy_spy(outcome, plan, data):
        to_policy.append(outcome)
        return handle(outcome, plan, data)

    inst.enforcer.handle = policy_spy
    deliver = HostLoop._deliver

    def bus_spy(self, outcome, plan):
        to_bus.append(outcome)
        return deliver(self, outcome, plan)

    x = np.ones((12, 3), "float32")
    x[5, 2] = np.nan  # batch 1, row 1
    y = np.zeros((12, 2), "float32")
    initial = model.get_weights()
    HostLoop._deliver = bus_spy
    try:
        weights = []
        model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0,
                  callbacks=[keras.callbacks.LambdaCallback(
                      on_train_batch_end=lambda batch, logs: weights.append(model.get_weights()))])
    finally:
        HostLoop._deliver = deliver
    plan = inst.plan
    return dict(inst=inst, initial=initial, plan=plan, records=records, to_policy=to_policy, to_bus=to_bus, weights=weights,
                slots=[f"{s.stage}: {s.where}" for s in plan.slots])


def test_the_plan_of_the_step_is_the_one_the_outcomes_index(fitted):
    assert fitted["slots"] == SLOTS


def test_an_accepted_step_moves_the_global_step_and_fails_nothing(fitted):
    outcome = fitted["to_policy"][0]
    assert isinstance(outcome, StepOutcome)
    assert (outcome.step_before, outcome.step_after, outcome.applied, outcome.moved) == (0, 1, True, True)
    assert (outcome.batch, outcome.epoch, outcome.epoch_batch, outcome.batch_size) == (0, 0, 0, 4)
    assert outcome.checked and not outcome.violated
    assert outcome.failures.tolist() == [0.0] * len(SLOTS)
    assert (outcome.failed_slots, outcome.failed_stages) == ((), ())
    assert (outcome.finite_counts, outcome.data_values, outcome.spike_table) == (None, None, None)
    assert outcome.recorded == frozenset({"scalars"})
    assert outcome.signals["data/input_max"] == 1.0 and outcome.signals["data/input_std"] == 0.0
    assert sorted(outcome.signals) == sorted(fitted["plan"].scalar_keys)
    assert dict(outcome.histograms) == {}
    assert sorted(outcome.logs) == ["loss"]
    kernel, bias = fitted["initial"]
    assert float(outcome.logs["loss"]) == pytest.approx(float(np.mean((kernel.sum(axis=0) + bias) ** 2)), rel=1e-6)
    assert dict(fitted["records"][0].logs) == {"loss": float(outcome.logs["loss"])}


def test_a_rejected_step_keeps_the_global_step_and_names_what_failed(fitted):
    outcome = fitted["to_policy"][1]
    assert (outcome.step_before, outcome.step_after, outcome.applied, outcome.moved) == (1, 1, False, False)
    assert (outcome.batch, outcome.epoch, outcome.epoch_batch, outcome.batch_size) == (1, 0, 1, 4)
    assert outcome.violated
    assert outcome.failures.tolist() == [1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    assert outcome.failed_slots == (0, 2, 3, 4, 5, 6, 7)
    assert outcome.failed_stages == ("data", "forward", "loss", "gradients", "update")
    # per finite slot (forward, loss, 2 gradients, 3 updates): NaN, +Inf, -Inf, values
    assert fitted["plan"].finite_slots == [2, 3, 4, 5, 6, 7, 8]
    assert outcome.finite_counts.tolist() == [[2, 0, 0, 8], [1, 0, 0, 1], [6, 0, 0, 6], [2, 0, 0, 2],
                                              [6, 0, 0, 6], [2, 0, 0, 2], [0, 0, 0, 1]]
    assert fitted["weights"][1][0].tolist() == fitted["weights"][0][0].tolist()  # nothing was applied
    event = tfguard.guard_events(fitted["inst"].model)[0]
    assert (event.step, event.batch, event.stage, event.where, event.applied) == (1, 1, "data", "x", False)
    assert event.counts == {"bad": 1, "nan": 1, "posinf": 0, "neginf": 0, "total": 12}


def test_the_step_after_a_rejected_one_starts_where_it_left_the_global_step(fitted):
    outcome = fitted["to_policy"][2]
    assert (outcome.step_before, outcome.step_after, outcome.applied) == (1, 2, True)
    assert (outcome.batch, outcome.epoch, outcome.epoch_batch) == (2, 0, 2)
    assert fitted["inst"].last_outcome is outcome and fitted["inst"].host_step == 2
    assert fitted["inst"].last_batch_size == 4


def test_the_policy_and_the_bus_receive_the_same_value(fitted):
    assert len(fitted["to_policy"]) == len(fitted["to_bus"]) == 3
    assert all(a is b for a, b in zip(fitted["to_policy"], fitted["to_bus"]))
    records = fitted["records"]
    assert [(r.step, r.batch, r.epoch, r.moved) for r in records] == [
        (o.step_after, o.batch, o.epoch, o.moved) for o in fitted["to_bus"]]
    # a rejected step's logs are not shown to a listener; its signals are
    assert dict(records[1].logs) == {}
    assert np.isnan(records[1].scalars[_tags.GLOBAL_GRAD_NORM])
    assert records[1].scalars["data/label_max"] == fitted["to_bus"][1].signals["data/label_max"] == 0.0


def test_nothing_in_an_outcome_can_change(fitted):
    outcome = fitted["to_policy"][1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.applied = True
    for array in (outcome.failures, outcome.finite_counts):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 0
    for mapping in (outcome.signals, outcome.logs):
        with pytest.raises(TypeError):
            mapping["loss"] = 0.0
    assert fitted["to_policy"][1].failures.tolist()[0] == 1.0


def test_recorded_histograms_are_read_only():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="out")], name="tiny")
    model.compile(optimizer="sgd", loss="mse")
    inst = instrument(model)
    inst.subscribe(lambda record: None, histograms_every=1, histogram_kinds=("gradients",))
    model.fit(np.ones((4, 3), "float32"), np.zeros((4, 2), "float32"), batch_size=4, verbose=0)
    outcome = inst.last_outcome
    assert not outcome.checked and outcome.applied and (outcome.step_before, outcome.step_after) == (0, 1)
    assert sorted(outcome.histograms) == sorted(inst.plan.histogram_keys)
    kernel = outcome.histograms["hist/gradients/tiny/out/kernel"]
    assert kernel.shape[1] == 3 and kernel[:, 2].sum() == 6  # the kernel's 6 gradients, bucketed
    with pytest.raises(ValueError, match="read-only"):
        kernel[0, 0] = 1.0
    with pytest.raises(TypeError):
        outcome.histograms["x"] = kernel


def test_a_hand_written_step_hands_out_the_same_value():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    step = tfguard.guard_step(mse_step(model, keras.optimizers.SGD(0.1)), model, policy="skip", quarantine_dir=None)
    good = np.ones((4, 2), "float32")
    bad = good.copy()
    bad[1, 0] = np.nan
    step(tf.constant(good), tf.ones((4, 1)))
    accepted = step.last_outcome
    assert (accepted.step_before, accepted.step_after, accepted.applied, accepted.batch) == (0, 1, True, 0)
    assert (accepted.epoch, accepted.epoch_batch, accepted.failed_slots) == (None, None, ())
    step(tf.constant(bad), tf.ones((4, 1)))
    rejected = step.last_outcome
    assert (rejected.step_before, rejected.step_after, rejected.applied, rejected.batch) == (1, 1, False, 1)
    assert rejected.failed_stages == ("data", "loss", "gradients", "update")
    assert rejected.failed_slots[0] == 0 and step.plan.slots[0].where == "argument 0"
    assert (step.consecutive_skips, step.skipped, [e.batch for e in step.events]) == (1, 1, [1])
    step(tf.constant(good), tf.ones((4, 1)))
    assert step.consecutive_skips == 0 and step.last_outcome.step_after == 2
