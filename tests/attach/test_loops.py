"""Hand-written loops under `tfguard run` get logs and a diagnosis (issue 42, item 2).

Each test runs a real script (`loop_scripts.py`) through `run_script`, as
`tfguard run` does, and reads the event files back: the tags the offline
commands and TensorBoard read, the diagnosis of the same rules as any run,
and the live diagnosis of the report agreeing with it. Every broken loop
has its healthy twin, which must raise no warning.
"""

from __future__ import annotations

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfguard.attach import attached, run_script
from tfguard.diagnose import diagnose_logdir
from tfguard.events import read_run

from . import loop_scripts as scripts
from .scripts import write

ALARMS = ("warning", "error")


def _loop_run(tmp_path, source, **fmt):
    """Runs the script attached; returns its result, its loop record, its run read back and its offline diagnosis."""
    result = run_script(write(tmp_path, source, **fmt), logdir=tmp_path / "runs")
    assert result.exit_code == 0, result.traceback
    (record,) = [f for f in result.fits if f.kind == "loop"]
    offline = {d.run: d for d in diagnose_logdir(str(tmp_path / "runs"))}[record.run]
    assert sorted(offline.ids) == sorted(record.diagnosis.ids)  # the live diagnosis says what the logs say
    return result, record, read_run(record.run_dir), offline


def _alarms(diagnosis) -> list[str]:
    return sorted(f.id for f in diagnosis.findings if f.severity in ALARMS)


def _steps(run, tag) -> list[int]:
    return [int(s) for s in run.scalars[tag][0]]


@pytest.mark.parametrize("decorator", [scripts.TRACED, scripts.EAGER], ids=["tf.function", "eager"])
def test_the_guides_loop_on_raw_pixels_is_found_unnormalized(tmp_path, capsys, decorator):
    result, record, run, offline = _loop_run(tmp_path, scripts.GUIDE, pixels=scripts.UNSCALED,
                                             decorator=decorator)
    out = capsys.readouterr().out
    first_loss = float(re.search(r"first batch loss ([\d.]+)", out).group(1))
    assert first_loss > 20 and "SCRIPT-SAYS iterations 32" in out  # the guide's loss of ~97, untouched
    assert record.run == "guide_mlp-loop" and record.model == "guide_mlp"
    (finding,) = [f for f in offline.findings if f.severity in ALARMS]
    assert finding.id == "unnormalized_input" and finding.evidence["max"] == 255.0
    # the loop's own loss and metric, at the steps its optimizer counted, on the Logger's schedule
    loss_steps = _steps(run, "batch/loss")
    assert loss_steps[:21] == list(range(1, 22)) and loss_steps[-1] == 31
    assert run.scalars["batch/loss"][2][0] == pytest.approx(first_loss, rel=0.01)
    assert _steps(run, "batch/sparse_categorical_accuracy")[-1] == 31
    # what the optimizer saw, per layer, and the activations of the model's layers
    for tag in ("grad_norm/global", "grad_norm/dense_1", "grad_norm/predictions", "update_ratio/dense_2",
                "weight_norm/predictions", "zero_grad_fraction/dense_1", "activation/dead_fraction/dense_1",
                "data/input_std", "data/label_max", "optimizer/learning_rate"):
        assert tag in run.scalars, tag
    assert "activation/dead_fraction/predictions" not in run.scalars  # a linear output has none
    # what could not run is said, with why
    skipped = {s["id"]: s["reason"] for s in offline.rules_skipped}
    assert "epoch" in skipped["no_learning"] and "invariants" in skipped["labels_ignored"]
    assert "config/model" in run.texts and "run/status" in run.texts


@pytest.mark.parametrize("decorator", [scripts.TRACED, scripts.EAGER], ids=["tf.function", "eager"])
def test_the_guides_loop_on_scaled_pixels_is_healthy(tmp_path, decorator):
    _, record, run, offline = _loop_run(tmp_path, scripts.GUIDE, pixels=scripts.SCALED, decorator=decorator)
    assert _alarms(offline) == [] and "dead_relu" in offline.rules_run
    assert run.scalars["data/input_max"][2].max() <= 1.0
    assert "val/sparse_categorical_accuracy" not in run.scalars  # the validation pass updates no weights


def test_a_gan_loop_with_two_optimizers_is_one_run(tmp_path, capsys):
    _, record, run, offline = _loop_run(tmp_path, scripts.GAN, pixels=scripts.SCALED)
    assert "SCRIPT-SAYS steps 30 30" in capsys.readouterr().out
    assert record.run == "discriminator+generator-loop"
    # one step per train_step, counted by the first optimizer, with each player's loss and gradients
    assert _steps(run, "batch/discriminator_loss") == _steps(run, "batch/generator_loss")
    assert _steps(run, "batch/discriminator_loss")[-1] == 21  # 30 steps: 1..20, then 21 (31 is not reached)
    for tag in ("optimizer/grad_norm/discriminator", "optimizer/grad_norm/generator",
                "grad_norm/discriminator/d_hidden", "grad_norm/generator/g_out"):
        assert tag in run.scalars, tag
    global_norm = run.scalars["grad_norm/global"][2]
    d_norm, g_norm = run.scalars["optimizer/grad_norm/discriminator"][2], run.scalars["optimizer/grad_norm/generator"][2]
    np.testing.assert_allclose(global_norm, np.sqrt(d_norm ** 2 + g_norm ** 2), rtol=1e-5)
    assert "batch/loss" not in run.scalars and "data/label_max" not in run.scalars  # the players' own targets
    assert _alarms(offline) == []


def test_a_gan_loop_on_raw_pixels_is_found_unnormalized(tmp_path):
    _, _, _, offline = _loop_run(tmp_path, scripts.GAN, pixels=scripts.UNSCALED)
    assert _alarms(offline) == ["unnormalized_input"]


def test_a_loop_with_a_dead_layer_is_found_and_its_healthy_twin_is_not(tmp_path):
    (tmp_path / "dead").mkdir()
    (tmp_path / "alive").mkdir()
    _, _, run, dead = _loop_run(tmp_path / "dead", scripts.DEAD, bias=-50)
    found = {f.where: f for f in dead.findings if f.id == "dead_relu"}
    assert found["hidden"].severity == "error" and run.scalars["activation/dead_fraction/hidden"][2][-1] == 1.0
    _, _, _, alive = _loop_run(tmp_path / "alive", scripts.DEAD, bias=0)
    assert _alarms(alive) == []


@pytest.mark.parametrize(("pixels", "alarms"), [(scripts.UNSCALED, ["unnormalized_input"]), (scripts.SCALED, [])],
                         ids=["raw", "scaled"])
def test_a_train_on_batch_loop_is_logged_and_diagnosed(tmp_path, pixels, alarms):
    _, record, run, offline = _loop_run(tmp_path, scripts.ON_BATCH, pixels=pixels)
    assert record.run == "batched-loop"
    assert _steps(run, "batch/loss")[:3] == [1, 2, 3] and "batch/accuracy" in run.scalars
    assert "activation/dead_fraction/hidden" in run.scalars and "update_ratio/probabilities" in run.scalars
    assert _alarms(offline) == alarms


@pytest.mark.parametrize(("poison", "alarms"), [(scripts.POISON, ["bad_record", "nonfinite"]), ("", [])],
                         ids=["nan-example", "healthy"])
def test_a_guard_step_loop_is_logged_and_its_violations_join_its_run(tmp_path, capsys, poison, alarms):
    result, record, run, offline = _loop_run(tmp_path, scripts.GUARDED_STEP, poison=poison)
    assert record.run == "guarded-loop" and "batch/loss" in run.scalars
    assert _alarms(offline) == alarms
    if poison:
        # the bad batch, met once per epoch, skipped by guard_step each time, and each time in the log
        assert "SCRIPT-SAYS iterations 27" in capsys.readouterr().out
        lines = [text for _, _, text in run.texts["guard/events"]]
        assert len(lines) == 3 and lines[0].startswith("- step 3, **data**: argument 0 (skipped)")
        assert [t for _, _, t in run.texts["guard/events"]][0].startswith("- step 3, **data**")


def test_nothing_of_the_loop_recorder_stays_once_the_session_closes():
    # a loop that is not attached costs nothing: no wrapper, no interceptor, no op in its step
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    optimizer, loss_fn = keras.optimizers.SGD(0.1), keras.losses.MeanSquaredError()
    plain_call, plain_update = keras.losses.Loss.__call__, keras.metrics.Mean.update_state
    with attached(logger=False):
        loss_fn(np.ones((2, 1)), np.zeros((2, 1)))

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = loss_fn(tf.zeros((4, 1)), model(x))
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)

    graph = step.get_concrete_function(tf.TensorSpec((4, 2))).graph
    assert keras.losses.Loss.__call__ is plain_call and keras.metrics.Mean.update_state is plain_update
    assert "__init_subclass__" not in vars(keras.metrics.Metric)
    assert not [op for op in graph.get_operations() if op.type in ("EagerPyFunc", "If", "StatelessIf")]


def test_a_step_compiled_with_xla_runs_as_it_would_and_its_run_says_why_it_has_no_signals(tmp_path):
    # a py_function does not compile with XLA (Keras compiles train_on_batch with it on a GPU):
    # the recorder lets such an update through, gated, and the run says so
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="relu", name="hidden"),
                              keras.layers.Dense(1, name="out")], name="xla_net")
    optimizer, loss_fn = keras.optimizers.SGD(0.1), keras.losses.MeanSquaredError()

    @tf.function(jit_compile=True)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    x, y = np.ones((8, 3), "float32"), np.ones((8, 1), "float32")
    with attached(logdir=tmp_path / "runs") as session:
        losses = [float(train_step(x, y)) for _ in range(3)]
    (record,) = session.fits
    assert record.run == "xla_net-loop" and int(optimizer.iterations.numpy()) == 3
    assert losses[2] < losses[0]
    assert any("compiled with XLA" in note for note in record.notes)
    assert "batch/loss" not in record.diagnosis.signals.scalars
