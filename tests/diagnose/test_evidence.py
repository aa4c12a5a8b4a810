"""Issue 41 items 3-7 and issue 46 items 7-8: findings only from evidence that can tell, each with its twin.

The checks themselves on a batch made for each case (a sigmoid collapsed at
exactly 0.5, `FalsePositives` on a batch with no predicted positive, NaN
rows, zero weights, one label), the rules on hand-made signals where a
threshold's two sides are the point, and the programs of
`user_programs_evidence.py` under `tfguard run` as a user runs them. The
whole table of programs is printed by `benchmarks/diagnosis_user_programs.py`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time

import keras
import numpy as np
import pytest

from tfguard import _tags
from tfguard._findings_table import findings_blocks
from tfguard.diagnose import LiveDiagnosis, Signals, Thresholds, diagnose
from tfguard.diagnose._rules.activations import dead_relu
from tfguard.diagnose._rules.data import label_range
from tfguard.diagnose._rules.invariants import collapsed_output, labels_ignored, untrained_variable
from tfguard.diagnose._rules.loss_curve import no_learning
from tfguard.diagnose._rules.optimizer import learning_rate
from tfguard.diagnose._rules.pipeline import input_bound
from tfguard.invariants import collapse, determinism, forget, watch
from tfguard.invariants._labels import labels_read, metrics_read

from . import user_programs as U
from . import user_programs_evidence as E

ALARMS = ("warning", "error")
PROGRAMS = {p.name: p for p in E.HEALTHY + E.BUGGY}
TH = Thresholds()


def _alarms(result) -> list:
    return [f for d in result.diagnoses for f in d.findings if f.severity in ALARMS]


def _run(tmp_path, name):
    result = U.run(PROGRAMS[name], tmp_path)
    assert result.exit_code == 0, result.traceback
    return result


def _x(rows=32, features=10):
    return np.random.default_rng(0).normal(size=(rows, features)).astype("float32")


def _dead_sigmoid(loss="binary_crossentropy", metrics=()):
    """ReLUs dead from the start under a sigmoid output at exactly 0.5 (a bad start, before any step)."""
    model = keras.Sequential([
        keras.Input((10,)),
        keras.layers.Dense(8, activation="relu", bias_initializer=keras.initializers.Constant(-100.0)),
        keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="sgd", loss=loss, metrics=list(metrics))
    return model


def _label_free(y_true, y_pred):
    return keras.ops.mean(keras.ops.square(y_pred))


# -- item 3: no verdict from degenerate evidence ---------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_a_sigmoid_collapsed_at_one_half_reads_its_labels(dtype):
    x = _x()
    y = (x[:, 0] > 0).astype(dtype)
    record = labels_read(_dead_sigmoid(), x, y)
    assert record["ok"] is True and record["evidence"]["loss"] == pytest.approx(np.log(2))
    assert record["evidence"]["loss_other_labels"] == record["evidence"]["loss"]  # blind at 0.5
    assert "label_blind_point" in record["evidence"]
    # the twin: a loss that never reads the labels is still found, at 0.5 and anywhere else
    blind = labels_read(_dead_sigmoid(loss=_label_free), x, y)
    assert blind["ok"] is False and blind["evidence"]["probe_relative_change"] == 0.0


def test_a_metric_with_nothing_to_count_on_the_batch_is_not_label_blind():
    x = _x()
    y = np.zeros(32, "float32")
    y[0] = 1.0  # one positive in 32: no predicted positive, FalsePositives is 0 for any labels
    record = metrics_read(_dead_sigmoid(metrics=[keras.metrics.FalsePositives(name="fp")]), x, y)
    assert record["ok"] is True and record["evidence"]["label_blind_point"] == ["fp"]

    def same_as_prediction(y_true, y_pred):  # the twin: a metric that compares y_pred with itself
        return keras.ops.mean(keras.ops.cast(keras.ops.equal(y_pred, y_pred), "float32"))

    record = metrics_read(_dead_sigmoid(metrics=[same_as_prediction]), x, y)
    assert record["ok"] is False and record["where"] == "same_as_prediction"


def test_a_batch_without_weight_or_with_nan_predictions_decides_nothing():
    x, y = _x(), (_x()[:, 0] > 0).astype("float32")
    record = labels_read(_dead_sigmoid(), x, y, np.zeros(32, "float32"))
    assert record["ok"] is None and "sample weights are all zero" in record["evidence"]["undecided"]
    x[3] = np.nan
    assert labels_read(_dead_sigmoid(), x, y)["ok"] is None
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(2), keras.layers.Dropout(0.5)])
    assert determinism(model, x)["ok"] is None  # NaN compares as nothing
    assert determinism(model, _x())["ok"] is True  # the twin: finite outputs


def test_one_output_for_a_batch_of_one_label_is_no_collapse():
    model = _dead_sigmoid()  # the same output for every example
    x = _x()
    record = collapse(model, x, y=np.ones(32, "float32"))
    assert record["ok"] is None and "labels are all the same" in record["evidence"]["undecided"]
    assert collapse(model, x, y=(x[:, 0] > 0).astype("float32"))["ok"] is False  # the twin


def test_the_checks_read_the_rows_of_the_first_batch_that_can_tell():
    model = _dead_sigmoid()
    w = watch(model)
    w.begin_fit()
    x, y = _x(64), (_x(64)[:, 0] > 0).astype("float32")
    x[:32] = np.nan  # the half of the batch the firewall would have refused
    weights = np.ones(64, "float32")
    weights[32:40] = 0.0  # and rows that carry no weight
    w.on_batch((x, y, weights))
    kept_x, _, kept_w = w.batch
    assert np.isfinite(kept_x).all() and len(kept_x) == 24 and kept_w.all()
    forget(model)
    model = _dead_sigmoid()
    w = watch(model)
    w.on_batch((np.full((8, 10), np.nan, "float32"), np.ones(8, "float32"), None))
    assert w.batch is None and not w.records  # nothing to read: it waits for the next batch
    forget(model)


def test_an_undecided_record_makes_no_finding():
    undecided = {"check": "labels_ignored", "ok": None, "where": None, "step": 1, "epoch": 0,
                 "evidence": {"undecided": "the model's predictions on the batch are not finite"}}
    failed = {**undecided, "ok": False, "where": "model", "evidence": {"loss": 0.3}}
    assert labels_ignored(Signals(texts={_tags.INVARIANT_RECORDS: [(1, json.dumps(undecided))]}), TH) == []
    assert labels_ignored(Signals(texts={_tags.INVARIANT_RECORDS: [(1, json.dumps(failed))]}), TH)


@pytest.mark.parametrize("name", ["augmentation_before_rescaling", "token_ids_beside_float_tags",
                                  "embedding_accuracy_rising", "first_batch_without_weight"])
def test_healthy_programs_get_no_alarm(tmp_path, name):
    result = _run(tmp_path, name)
    assert result.diagnoses and _alarms(result) == [], [(f.id, f.message) for f in _alarms(result)]


@pytest.mark.parametrize("name", sorted(p.name for p in E.BUGGY))
def test_the_root_cause_comes_first_and_every_other_alarm_is_true(tmp_path, name):
    program = PROGRAMS[name]
    alarms = _alarms(_run(tmp_path, name))
    assert alarms and alarms[0].id == program.cause, [(f.id, f.severity) for f in alarms]
    assert "labels_ignored" not in [f.id for f in alarms]
    for later in alarms[1:]:
        assert later.id in program.also or later.id == program.cause, later.id
    first = alarms[0]
    if name == "layer_normalization_over_one_feature":  # the weights no gradient reaches
        assert first.evidence["code"] == "discarded" and "multi_head_attention" in first.where
    if name == "own_optimizer_rate_far_too_high":  # the optimizer that applied the updates
        assert "Adam's learning rate is 1" in first.message and "RMSprop" not in first.message
    if name == "deep_sigmoid_at_chance":  # item 5: a symptom of a run at chance is no remark
        assert first.severity == "warning"
    if name == "binary_loss_on_three_classes":  # item 4: advice that would not merge classes
        assert "3 classes" in first.message and "{0, 1}" not in first.suggestion
        assert "Dense(3, activation='softmax')" in first.suggestion


def test_a_first_batch_the_firewall_skipped_is_not_read_as_labels_ignored(tmp_path):
    program = U.UserProgram("first_batch_nan", "nonfinite", """
        x, y = load_breast_cancer(return_X_y=True)
        x = ((x - x.mean(0)) / x.std(0)).astype("float32")
        x[:32, 3] = np.nan  # every row of the first batch
        model = keras.Sequential([keras.Input((30,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(1, activation="sigmoid")])
        model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
        model.fit(x, y.astype("float32"), epochs=3, batch_size=32, shuffle=False, verbose=0)
    """)
    result = U.run(program, tmp_path)
    (d,) = result.diagnoses
    assert "labels_ignored" not in d.ids
    records = [json.loads(t) for _, t in d.signals.texts[_tags.INVARIANT_RECORDS]]
    assert [r["ok"] for r in records if r["check"] == "labels_ignored"] == [True]  # on batch 2


# -- item 4: every finding true to its rule ----------------------------------------------------------
def test_a_layer_is_never_reported_below_the_threshold_it_states():
    steps = np.arange(1, 41)
    dipped = np.r_[np.full(5, 0.75), np.full(35, 0.5)]  # 3 observations above 70 %, then 50 %
    assert dead_relu(Signals.from_arrays({"activation/dead_fraction/dense": (steps, dipped)}), TH) == []
    dying = np.r_[np.full(5, 0.5), np.full(35, 0.8)]
    (f,) = dead_relu(Signals.from_arrays({"activation/dead_fraction/dense": (steps, dying)}), TH)
    assert f.evidence["dead_fraction"] >= TH.dead_fraction


def _records(*records):
    return {_tags.INVARIANT_RECORDS: [(r["step"], json.dumps(r)) for r in records]}


def test_a_run_whose_accuracy_reaches_the_top_is_neither_collapsed_nor_hurt_by_an_unmoved_variable():
    collapsed = {"check": "collapsed_output", "ok": False, "where": "model", "step": 10, "epoch": 0,
                 "evidence": {"spread": 0.0, "magnitude": 1.0, "examples": 32, "features": 2}}
    unmoved = {"check": "untrained_variable", "ok": False, "where": "dense/bias", "step": 10, "epoch": 0,
               "evidence": {"count": 1, "trainable": 4, "variables": ["dense/bias"]}}
    climbing = {"train/accuracy": (None, [0.5, 0.7, 0.85, 0.92])}
    flat = {"train/accuracy": (None, [0.5, 0.5, 0.51, 0.5])}
    top = Signals.from_arrays(climbing, texts=_records(collapsed, unmoved))
    assert collapsed_output(top, TH) == []
    (f,) = untrained_variable(top, TH)
    assert f.severity == "info" and f.evidence["accuracy_reached"] == 0.92
    stuck = Signals.from_arrays(flat, texts=_records(collapsed, unmoved))  # the twin
    assert [f.severity for f in collapsed_output(stuck, TH) + untrained_variable(stuck, TH)] == [
        "warning", "warning"]


def _labels(low, high):
    model = {"loss": "binary_crossentropy", "output_units": 1, "output_activation": "sigmoid",
             "layers": [{"name": "out"}]}
    return Signals.from_arrays({"data/label_min": ([1, 2], [low, low]),
                                "data/label_max": ([1, 2], [high, high])}, model=model)


def test_labels_zero_one_two_under_a_binary_loss_are_three_classes():
    (f,) = label_range(_labels(0.0, 2.0), TH)
    assert "3 classes" in f.message and "sparse_categorical_crossentropy" in f.suggestion
    assert "{0, 1}" not in f.suggestion
    (f,) = label_range(_labels(-1.0, 1.0), TH)  # the twin: -1/+1 labels are two classes
    assert "(y + 1) / 2" in f.suggestion


def test_a_rejected_update_of_train_on_batch_is_a_finding(tmp_path):
    program = U.UserProgram("train_on_batch_nan", "bad_record", """
        import tfguard
        rng = np.random.default_rng(0)
        x = rng.normal(size=(256, 10)).astype("float32")
        y = (x[:, 0] > 0).astype("float32")
        x[7] = np.nan
        model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(1, activation="sigmoid")])
        model.compile(optimizer="adam", loss="binary_crossentropy")
        model = tfguard.guard(model, policy="skip")
        for epoch in range(2):
            for i in range(0, 256, 32):
                model.train_on_batch(x[i:i + 32], y[i:i + 32])
    """)
    result = U.run(program, tmp_path)
    assert result.exit_code == 0, result.traceback
    (d,) = result.diagnoses
    assert d.run.endswith("-outside-fit") and d.ids == ["bad_record"]  # the NaN row is the data's
    assert d.findings[0].severity == "warning" and d.findings[0].evidence["guard_events"] == 2
    # the same row in both passes; outside fit there are no epochs: the batches it was in
    assert d.findings[0].evidence["came_back_in"] == [0, 8]
    assert "came back in batches 0, 8" in d.findings[0].message


# -- item 5: severity that matches harm ----------------------------------------------------------------
def _chance(accuracy, loss):
    model = {"loss": "binary_crossentropy", "output_units": 1}
    steps = np.arange(1, 61)
    return Signals.from_arrays({"train/accuracy": (None, accuracy), "train/loss": (None, loss),
                                "batch/loss": ([1, 2, 3], [0.78, 0.77, 0.77]),
                                "grad_norm/dense": (steps, np.full(60, 1e-6)),
                                "grad_norm/dense_9": (steps, np.full(60, 0.3))}, model=model)


def test_a_network_at_chance_gets_warnings_not_remarks():
    d = diagnose(_chance([0.49, 0.5, 0.497, 0.5], [0.75, 0.70, 0.694, 0.693]))
    assert d.by_id("vanishing_gradient")[0].severity == "warning"
    (nl,) = d.by_id("no_learning")
    assert nl.evidence["chance_best_accuracy"] == 0.5 and "never did better than chance" in nl.message
    assert nl.cause == ("vanishing_gradient", "dense")
    # the twin: the same gradients in a run that learns are a remark
    d = diagnose(_chance([0.6, 0.75, 0.82, 0.88], [0.6, 0.45, 0.38, 0.3]))
    assert d.by_id("vanishing_gradient")[0].severity == "info" and not d.by_id("no_learning")


def test_an_accuracy_that_climbs_is_learning_whatever_the_loss_did():
    flat = {"train/loss": (None, [0.693, 0.693, 0.692, 0.692]),
            "batch/loss": ([1, 2, 3], [0.6931, 0.6932, 0.6931])}
    model = {"loss": "binary_crossentropy", "output_units": 1}
    rising = Signals.from_arrays({**flat, "train/accuracy": (None, [0.518, 0.578, 0.628, 0.679])},
                                 model=model)
    assert no_learning(rising, TH) == []
    stuck = Signals.from_arrays({**flat, "train/accuracy": (None, [0.6, 0.61, 0.6, 0.61])}, model=model)
    assert [f.id for f in no_learning(stuck, TH)] == ["no_learning"]  # the twin


def test_a_first_loss_of_zero_is_a_batch_without_weight():
    batch = ([1, 2, 3, 4, 5, 6], [0.0, 0.35, 0.47, 0.52, 0.55, 0.57])  # Keras's running mean
    s = Signals.from_arrays({"batch/loss": batch, "train/loss": ([6], [0.57])})
    assert learning_rate(s, TH) == []
    jump = Signals.from_arrays({"batch/loss": ([1, 2, 3, 4], [0.0, 0.5, 9.0, 80.0]),
                                "train/loss": ([4], [80.0])})
    assert learning_rate(jump, TH)[0].evidence["first_loss"] == 0.5  # the twin: a real jump


# -- item 6: input_bound only for a wait a pipeline change wins back -----------------------------------
def _waits(cpu_wait, lint=()):
    steps = [11, 21, 31, 41]
    return Signals.from_arrays({_tags.INPUT_WAIT_FRACTION: (steps, [0.6, 0.7, 0.65, 0.6]),
                                _tags.CPU_WAIT_FRACTION: (steps, [cpu_wait] * 4)}, lint=list(lint))


def test_a_wait_on_a_busy_machine_is_no_input_bound_unless_a_stage_is_slow():
    assert input_bound(_waits(0.6), TH) == []
    assert [f.id for f in input_bound(_waits(0.02), TH)] == ["input_bound"]
    slow = {"id": "python_in_pipeline", "where": "MapDataset", "evidence": {"code": "python_map"}}
    (f,) = input_bound(_waits(0.6, [slow]), TH)
    assert f.evidence["median_cpu_wait_fraction"] == 0.6 and f.evidence["stage_code"] == "python_map"


def _pin(cpus: set) -> None:
    """Every thread of this process (TensorFlow's pools too) on `cpus`."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), cpus)


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="run-queue times are Linux's")
def test_a_small_in_memory_regression_beside_two_cpu_bound_processes_is_not_input_bound():
    cpus = os.sched_getaffinity(0)
    one = {min(cpus)}
    _pin(one)  # every thread of the run and two busy processes share one CPU
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             preexec_fn=lambda: os.sched_setaffinity(0, one)) for _ in range(2)]
    try:
        time.sleep(0.2)
        keras.utils.set_random_seed(0)
        rng = np.random.default_rng(0)
        x = rng.normal(size=(2000, 8)).astype("float32")
        y = (x @ rng.normal(size=(8, 1))).astype("float32")
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(1)])
        model.compile(optimizer="adam", loss="mse")
        live = LiveDiagnosis()
        model.fit(x, y, epochs=3, batch_size=32, verbose=0, callbacks=[live])
    finally:
        for hog in hogs:
            hog.kill()
        _pin(cpus)
    signals = live.recorder.signals()
    busy = signals.series(_tags.CPU_WAIT_FRACTION)
    assert busy is not None and np.median(busy.values) > TH.cpu_wait_max
    assert not diagnose(signals).by_id("input_bound")


# -- item 7: a report that reads anywhere --------------------------------------------------------------
def test_the_report_read_through_a_pipe_is_blocks_once_per_finding_with_no_word_cut(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(U.PRELUDE + textwrap.dedent(PROGRAMS["deep_sigmoid_at_chance"].body))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "tfguard", "run", "--logdir", str(tmp_path / "runs"),
                           str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    shown = "\n".join(line for line in done.stderr.splitlines()
                      if not line.startswith(("I0000", "W0000", "E0000", "WARNING:")))
    report = json.loads((tmp_path / "runs" / "report.json").read_text())
    findings = [f for run in report["runs"] for f in run["symptoms"]]
    assert len(findings) >= 2
    lines = shown.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("─"))  # the summary's title
    progress, summary = "\n".join(lines[:rule]), "\n".join(lines[rule + 1:])
    words = " ".join(summary.split())
    for f in findings:
        header = f"{f['severity']} {f['id']}"
        assert summary.count(header) == 1, (header, summary)  # summarized once
        assert progress.count(f"found {header}") == 1  # announced once while training, one line
        assert " ".join(f["message"].split()) in words  # every word whole: nothing cut mid-word
    assert max(len(line) for line in summary.splitlines() if line.startswith("  ")) <= 80
    assert "│" not in summary and "┃" not in summary  # no table off a terminal
    assert len(summary.splitlines()) < 10 * len(findings) + 12


def test_blocks_wrap_at_words_under_an_indent():
    from tfguard._findings import Finding

    long = Finding("dead_relu", "warning", "BatchNormalization " * 12, where="block/BatchNormalization",
                   suggestion="Use LeakyReLU in 'block/BatchNormalization'.", onset_step=3)
    text = findings_blocks([long], width=40, onset=True).plain
    lines = text.splitlines()
    assert lines[0] == "warning dead_relu in block/BatchNormalization, step 3"
    assert all(line.startswith("  ") and not line.endswith(" ") for line in lines[1:])
    assert all(word == "BatchNormalization" for line in lines[1:-2] for word in line.split())
