"""`AttachSession` from Python: fit patched and restored, callbacks added once, models put back."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tfguard._errors import ContractError
from tfguard._firewall import guard, instrumentation_of
from tfguard.attach import AttachSession, attach, attached
from tfguard.diagnose import LiveDiagnosis, diagnose_logdir


def small_model(name="net"):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")], name=name)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


@pytest.fixture
def xy():
    rng = np.random.default_rng(0)
    return rng.random((32, 4), dtype=np.float32), (np.arange(32) % 3).astype("int64")


def _owner(subscription):
    """Who hears a subscription: the callback whose `Listening` subscribed it."""
    listening = getattr(subscription.listener, "__self__", None)
    return getattr(getattr(listening, "on_record", None), "__self__", None)


class Spy(keras.callbacks.Callback):
    """Sees, at train begin, the guard and how many live recorders listen to the model."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_begin(self, logs=None):
        inst = instrumentation_of(self.model)
        recorders = [s for s in inst.bus.subscriptions if isinstance(_owner(s), LiveDiagnosis)]
        self.seen.append((inst.guard, len(recorders)))


def test_fit_is_the_same_object_after_the_session_also_on_an_exception():
    before = keras.Model.fit
    own = "fit" in keras.Model.__dict__
    with pytest.raises(RuntimeError, match="inside"), attached(logger=False) as session:
        assert keras.Model.fit is not before and session.active
        raise RuntimeError("inside")
    assert keras.Model.fit is before and session.original_fit is before
    assert ("fit" in keras.Model.__dict__) == own
    assert not session.active


def test_each_fit_is_guarded_once_diagnosed_and_the_model_put_back(tmp_path, xy):
    model, spy = small_model(), Spy()
    with attached(logdir=tmp_path, logger=False, policy="skip") as session:
        first = model.fit(*xy, epochs=2, verbose=0, callbacks=[spy])
        model.fit(*xy, epochs=1, verbose=0, callbacks=(spy,))
    (guard_1, live_1), (guard_2, live_2) = spy.seen
    assert guard_1 is guard_2 and guard_1.policy == "skip"  # guarded once
    assert live_1 == live_2 == 1
    assert sorted(first.history) == ["loss"]  # the guard's counters are hidden
    # the fits of one model are one training history: one run, one diagnosis of all 3 epochs
    assert [f.run for f in session.fits] == ["net-fit1", "net-fit1"]
    assert [d.run for d in session.diagnoses] == ["net-fit1"]
    assert len(session.diagnoses[0].signals.epoch_end_steps) == 3
    assert instrumentation_of(model) is None  # released: the model is as it was
    assert "guard_violations" not in model.fit(*xy, verbose=0).history


def test_a_live_diagnosis_the_caller_passed_is_used_not_duplicated(xy):
    model, spy = small_model("mine"), Spy()
    live = LiveDiagnosis(run="users")
    with attached(logger=False) as session:
        model.fit(*xy, epochs=2, verbose=0, callbacks=[live, spy])
    assert spy.seen[0][1] == 1
    assert session.fits[0].diagnosis.run == "mine-fit1"
    assert session.fits[0].diagnosis.rules_run  # from the caller's recorder


def test_a_model_the_caller_guarded_keeps_its_guard(xy, tmp_path):
    model = guard(small_model(), policy="raise", quarantine_dir=str(tmp_path))
    config = instrumentation_of(model).guard
    with attached(logger=False, policy="warn"):
        history = model.fit(*xy, verbose=0)
    assert instrumentation_of(model).guard is config
    assert "guard_violations" in history.history  # the caller's guard, the caller's logs


def test_a_fit_that_raises_is_still_recorded(xy):
    model = small_model("bad")
    with attached(logger=False) as session, pytest.raises(ValueError):
        model.fit(xy[0][:, :3], xy[1], verbose=0)  # wrong input width
    (record,) = session.fits
    assert record.error.startswith("ValueError") and record.diagnosis is not None


def test_attach_opens_until_close_and_sessions_do_not_nest():
    session = attach(logger=False)
    try:
        with pytest.raises(ContractError, match="at most one open"):
            AttachSession(logger=False).start()
    finally:
        session.close()
    session.close()  # idempotent
    with AttachSession(logger=False):
        pass


def test_an_invalid_policy_is_refused_before_anything_is_patched():
    before = keras.Model.fit
    with pytest.raises(ContractError, match="policy"):
        attached(policy="ignore")
    assert keras.Model.fit is before


def test_a_fit_in_a_loop_is_one_story_long_enough_to_diagnose(tmp_path, xy):
    model = small_model("looped")
    x, y = xy
    with attached(logdir=tmp_path) as session:
        for _ in range(6):
            model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    (diagnosis,) = session.diagnoses
    steps = diagnosis.signals.epoch_end_steps.tolist()
    assert len(steps) == 6 and steps == sorted(steps) and steps[0] > 0  # steps continue
    assert "no_learning" in diagnosis.rules_run  # 6 epochs: enough for the curve rules
    runs = sorted(p.name for p in tmp_path.iterdir() if p.is_dir() and p.name != "quarantine")
    assert runs == ["looped-fit1"]


def test_a_crashed_fit_is_reported_as_such_never_healthy(tmp_path, xy):
    model = small_model("crashy")

    class Boom(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                raise RuntimeError("the data loader died")

    with attached(logdir=tmp_path, logger=False) as session, pytest.raises(RuntimeError):
        model.fit(*xy, epochs=2, batch_size=8, verbose=0, callbacks=[Boom()])
    (diagnosis,) = session.diagnoses
    assert diagnosis.status["state"] == "failed" and not diagnosis.healthy
    assert diagnosis.status["type"] == "RuntimeError" and "data loader died" in diagnosis.status["text"]


def test_a_gan_records_both_optimizers_in_its_hparams(tmp_path):
    from tests.firewall.foreign import gan

    model, x = gan()
    model.d_optimizer.learning_rate.assign(2e-4)
    with attached(logdir=tmp_path) as session:
        model.fit(x, epochs=1, batch_size=16, verbose=0)
    (diagnosis,) = session.diagnoses
    hparams = diagnosis.hparams
    assert (hparams["d_optimizer"], hparams["g_optimizer"]) == ("Adam", "Adam")
    assert (hparams["d_optimizer_learning_rate"], hparams["g_optimizer_learning_rate"]) == (2e-4, 1e-3)
    assert hparams["batch_size"] == 16 and isinstance(hparams["batch_size"], int)
    (offline,) = diagnose_logdir(tmp_path)  # read back: the HParams plugin's doubles are ints again
    assert offline.hparams["batch_size"] == 16 and isinstance(offline.hparams["batch_size"], int)
    assert offline.hparams["d_optimizer_learning_rate"] == 2e-4
