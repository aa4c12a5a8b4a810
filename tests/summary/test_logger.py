"""tfguard.Logger: what it writes, at which steps, from which step computation."""

from __future__ import annotations

import json
import os
import signal
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata as hp_metadata

import tfguard
from tests.conftest import step_graph
from tests.summary.conftest import tiny_cnn
from tests.summary.readback import read_run, run_dirs, steps
from tests.terminal import sigint_raises
from tfguard import _tags
from tfguard._errors import ContractError, GuardViolation, SummaryWriteError
from tfguard._firewall import instrumentation_of
from tfguard.diagnose import diagnose_logdir
from tfguard.events import read_logdir
from tfguard.summary import Logger, SummaryWarning
from tfguard.summary._lifecycle import INNER


def _fit(model, x, y, logger, **kwargs):
    kwargs.setdefault("batch_size", 8)
    kwargs.setdefault("verbose", 0)
    kwargs.setdefault("shuffle", False)
    return model.fit(x, y, callbacks=[logger], **kwargs)


def test_tags_steps_and_plugins(tmp_path, images):
    x, y = images  # 48 samples, batch 8: 6 steps per epoch
    logger = Logger(tmp_path, {"lr": 1e-2}, scalars_every=3, histograms_every=4)
    _fit(tiny_cnn(), x, y, logger, epochs=2, validation_data=(x[:16], y[:16]))
    assert run_dirs(str(tmp_path)) == [logger.run_path]
    run = read_run(logger.run_path)
    scalar_steps = [1, 4, 7, 10]  # iterations after the step, for steps that started at 0, 3, 6, 9
    for tag in ("batch/loss", "batch/accuracy", _tags.GLOBAL_GRAD_NORM, "grad_norm/conv",
                "zero_grad_fraction/hidden", "activation/dead_fraction/conv",
                "activation/saturated_fraction/hidden", _tags.INPUT_MEAN, _tags.INPUT_STD, _tags.LABEL_MAX,
                "weight_norm/out", "update_ratio/conv"):
        assert steps(run[tag]) == scalar_steps, tag
        assert {p.plugin for p in run[tag]} == {"scalars"}
    for tag in ("train/loss", "train/accuracy", "val/loss", "val/accuracy", _tags.EPOCH):
        assert steps(run[tag]) == [6, 12], tag
    assert [p.value for p in run[_tags.EPOCH]] == [0.0, 1.0]
    assert steps(run[_tags.LEARNING_RATE]) == [1, 4, 6, 7, 10, 12]
    assert run[_tags.LEARNING_RATE][0].value == pytest.approx(1e-2)
    assert all(p.value > 0 for p in run[_tags.STEPS_PER_SECOND])
    for tag in ("hist/weights/tiny/conv/kernel", "hist/gradients/tiny/hidden/kernel", "hist/activations/conv",
                "hist/activations/out"):
        assert steps(run[tag]) == [1, 5, 9], tag
        assert run[tag][0].plugin == "histograms" and run[tag][0].value.shape == (30, 3)
    assert run[_tags.LABEL_MAX][0].value == 2.0
    assert 0 < run["update_ratio/conv"][0].value < 1
    assert run[_tags.CONFIG_HPARAMS][0].step == 0 and run[_tags.CONFIG_HPARAMS][0].plugin == "text"
    assert not any(tag.startswith(("guard/", "train/guard", "batch/guard")) for tag in run)


def test_config_model_is_the_lint_description(tmp_path, images):
    from tfguard.lint import describe_model

    x, y = images
    model = tiny_cnn()
    logger = Logger(tmp_path, scalars_every=0, histograms=False)
    _fit(model, x, y, logger)
    (point,) = read_run(logger.run_path)[_tags.CONFIG_MODEL]
    assert point.plugin == "text"
    assert json.loads(point.value) == json.loads(json.dumps(describe_model(model), default=str))


def test_learning_rate_schedule_is_logged_at_each_step(tmp_path, images):
    x, y = images
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    model = tiny_cnn()
    model.compile(optimizer=keras.optimizers.SGD(schedule), loss="sparse_categorical_crossentropy")
    logger = Logger(tmp_path, scalars_every=1, histograms=False)
    _fit(model, x[:32], y[:32], logger)
    points = read_run(logger.run_path)[_tags.LEARNING_RATE]
    assert steps(points) == [1, 2, 3, 4, 4]
    for point in points:
        assert point.value == pytest.approx(0.1 * 0.5**point.step)


def test_record_if_and_histogram_kinds(tmp_path, images):
    x, y = images
    asked = []
    logger = Logger(tmp_path, scalars_every=0, histograms_every=1, histograms=["gradients"],
                    record_if=lambda step: asked.append(step) or step in (2, 5))
    model = tiny_cnn()
    _fit(model, x, y, logger)
    run = read_run(logger.run_path)
    assert steps(run["hist/gradients/tiny/conv/kernel"]) == [2, 5]
    # asked once before each step: where it says no, the step runs without histograms
    assert asked == [1, 2, 3, 4, 5, 6]
    assert instrumentation_of(model).bus.subscriptions == []  # the logger's schedule left with it
    assert not any(t.startswith(("hist/weights/", "hist/activations/", "grad_norm/")) for t in run)


def test_several_fits_continue_the_same_run(tmp_path, images):
    x, y = images
    model = tiny_cnn()
    logger = Logger(tmp_path, {"a": 1}, scalars_every=2, histograms=False)
    _fit(model, x, y, logger)
    _fit(model, x, y, logger)
    run = read_run(logger.run_path)
    assert steps(run["train/loss"]) == [6, 12]
    assert steps(run[_tags.GLOBAL_GRAD_NORM]) == [1, 3, 5, 7, 9, 11]
    assert len(run[_tags.CONFIG_HPARAMS]) == 1 and len(run[hp_metadata.SESSION_START_INFO_TAG]) == 1
    assert run_dirs(str(tmp_path)) == [logger.run_path]


def _step_graph_ops(model, x, y):
    """The op types of the model's recording step (the trace that computes the signals)."""
    graph = step_graph(model, (tf.TensorSpec((None, *x.shape[1:]), tf.float32),
                               tf.TensorSpec((None,), tf.int64))).as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return [n.op for n in nodes]


def test_guarded_model_signals_come_from_the_guard_step(tmp_path, images):
    x, y = images
    x = x.copy()
    x[20] = np.nan  # the third batch holds a NaN
    model = tfguard.guard(tiny_cnn(), policy="skip", max_quarantined=0)
    inst = instrumentation_of(model)
    logger = Logger(tmp_path, scalars_every=1, histograms_every=2)
    _fit(model, x, y, logger)
    # one instrumentation: the guard's step computes the signals the logger writes
    assert instrumentation_of(model) is inst and inst.guard is not None
    run = read_run(logger.run_path)
    assert inst.violations == 1 and inst.skipped == 1
    (event,) = run[_tags.GUARD_EVENTS]
    assert event.plugin == "text" and event.step == 2 and "\n" not in event.value
    assert event.value.startswith("- step 2, **data**:") and "skipped" in event.value
    assert [p.value for p in run[_tags.GUARD_VIOLATIONS]] == [1.0, 1.0]  # at the event, at the epoch end
    assert [p.value for p in run[_tags.GUARD_SKIPPED]][-1] == 1.0
    # the skipped step did not advance the global step: 6 batches, 5 updates
    assert steps(run["train/loss"]) == [5]
    assert steps(run[_tags.GLOBAL_GRAD_NORM]) == [1, 2, 2, 3, 4, 5]
    # batch-level values only for applied updates: none again at the unchanged step 2
    assert steps(run["batch/loss"]) == steps(run["weight_norm/out"]) == [1, 2, 3, 4, 5]
    # and the traced step computes the gradients once (one Conv2D layer -> one filter gradient),
    # exactly the gradient ops of the same guarded model without a logger
    ops = _step_graph_ops(model, x, y)
    assert ops.count("Conv2DBackpropFilter") == 1
    plain = tfguard.guard(tiny_cnn(), policy="skip", max_quarantined=0)
    plain.fit(x[:8], y[:8], verbose=0)
    plain_ops = _step_graph_ops(plain, x, y)
    for op in ("Conv2DBackpropFilter", "Conv2DBackpropInput", "BiasAddGrad", "ReluGrad", "TanhGrad", "MatMul"):
        assert ops.count(op) == plain_ops.count(op), op


def test_a_skipped_last_batch_writes_the_counters_once_at_the_epoch_end(tmp_path):
    """The skipped last batch and the epoch end share a step: one point there, not two (issue 46)."""
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    x[60] = np.nan  # the last of 4 batches, every epoch
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile("sgd", "mse")
    model = tfguard.guard(model, policy="skip", max_quarantined=0)
    logger = Logger(tmp_path, scalars_every=1, histograms=False, invariants=False)
    model.fit(x, np.zeros((64, 2), "float32"), batch_size=16, epochs=2, verbose=0, shuffle=False,
              callbacks=[logger])
    run = read_run(logger.run_path)
    assert steps(run[_tags.GUARD_EVENTS]) == [3, 6]  # 3 updates an epoch
    for tag in (_tags.GUARD_SKIPPED, _tags.GUARD_VIOLATIONS):
        assert steps(run[tag]) == [3, 6], tag
    assert [p.value for p in run[_tags.GUARD_SKIPPED]] == [1.0, 2.0]


def test_exception_in_the_step_closes_the_run(tmp_path, images):
    x, y = images
    x = x.copy()
    x[30] = np.inf
    model = tfguard.guard(tiny_cnn(), policy="raise", max_quarantined=0)
    previous = signal.getsignal(signal.SIGTERM)
    logger = Logger(tmp_path, {"lr": 1}, scalars_every=1, histograms=False,
                    max_queue=10_000, flush_millis=3_600_000)
    with pytest.raises(GuardViolation):
        _fit(model, x, y, logger)
    run = read_run(logger.run_path)  # closed, so on disk: no flush, no epoch end happened
    assert steps(run["batch/loss"]) == [1, 2, 3]
    assert run[_tags.GUARD_EVENTS][0].step == 3
    ends = [hp_metadata.parse_session_end_info_plugin_data(p.content).status
            for p in run[hp_metadata.SESSION_END_INFO_TAG]]
    assert ends == [api_pb2.STATUS_FAILURE]
    assert signal.getsignal(signal.SIGTERM) == previous
    assert getattr(model.train_function, INNER, None) is None
    assert instrumentation_of(model).bus.subscriptions == []


def test_keyboard_interrupt_outside_the_step_is_flushed(tmp_path, images):
    x, y = images

    class CtrlC(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 3:
                os.kill(os.getpid(), signal.SIGINT)

    with sigint_raises():  # as in a terminal, however the suite was started
        logger = Logger(tmp_path, scalars_every=1, histograms=False, max_queue=10_000, flush_millis=3_600_000)
        model = tiny_cnn()
        with pytest.raises(KeyboardInterrupt):
            model.fit(x, y, batch_size=8, verbose=0, callbacks=[logger, CtrlC()])
        # read before anything closes the logger: the SIGINT handler flushed
        assert steps(read_run(logger.run_path)["batch/loss"]) == [1, 2, 3, 4]
        logger.close()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_unwritable_logdir_training_goes_on_with_one_warning(tmp_path, images):
    x, y = images
    blocker = tmp_path / "file"
    blocker.write_text("x")
    logger = Logger(blocker / "logs", {"a": 1}, scalars_every=1, histograms_every=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = _fit(tiny_cnn(), x, y, logger, epochs=2)
    assert len(history.history["loss"]) == 2
    assert len([w for w in caught if w.category is SummaryWarning]) == 1
    assert not logger.active


def test_unwritable_logdir_strict_stops_cleanly(tmp_path, images):
    x, y = images
    blocker = tmp_path / "file"
    blocker.write_text("x")
    model = tiny_cnn()
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SummaryWriteError, match="strict=True"):
        _fit(model, x, y, Logger(blocker / "logs", strict=True))
    assert int(model.optimizer.iterations.numpy()) == 0
    assert signal.getsignal(signal.SIGTERM) == previous


@pytest.mark.parametrize(
    "kwargs, match",
    [({"scalars_every": -1}, "expected an integer >= 0"), ({"histograms_every": 1.5}, "histograms_every"),
     ({"histograms": ["weights", "x"]}, "subset of"), ({"record_if": 3}, "record_if"),
     ({"embeddings": "dense"}, "embeddings"), ({"images": -2}, "images")],
)
def test_invalid_options(tmp_path, kwargs, match):
    with pytest.raises(ContractError, match=match):
        Logger(tmp_path, **kwargs)


def test_never_prints(tmp_path, images, capfd):
    x, y = images
    _fit(tiny_cnn(), x, y, Logger(tmp_path, {"a": 1}, scalars_every=2, histograms_every=3))
    out, _err = capfd.readouterr()
    assert out == ""


def test_context_manager_closes(tmp_path, images):
    x, y = images
    with Logger(tmp_path, scalars_every=1, histograms=False, max_queue=10_000,
                flush_millis=3_600_000) as logger:
        _fit(tiny_cnn(), x[:16], y[:16], logger)
    assert steps(read_run(logger.run_path)["batch/loss"]) == [1, 2]


def test_the_events_reader_reads_the_run_back(tmp_path, images):
    x, y = images
    logger = Logger(tmp_path, {"lr": 0.01, "opt": "adam"}, scalars_every=2, histograms_every=3)
    _fit(tiny_cnn(), x, y, logger, epochs=2, validation_split=0.25)
    (run,) = read_logdir(tmp_path).values()
    assert not run.damage
    assert run.hparams == {"lr": 0.01, "opt": "adam"}
    assert {"train/loss", "val/loss", "batch/loss", _tags.GLOBAL_GRAD_NORM, "update_ratio/conv"} <= set(run.scalars)
    assert {"hist/weights/tiny/conv/kernel", "hist/gradients/tiny/conv/kernel", "hist/activations/conv"} <= set(
        run.histograms)
    assert {_tags.CONFIG_HPARAMS, _tags.CONFIG_MODEL} <= set(run.texts)


def test_config_lint_of_the_model_and_its_first_batch(tmp_path, images):
    _, y = images
    raw = np.random.default_rng(0).integers(0, 256, size=(48, 8, 8, 1)).astype("uint8")
    logger = Logger(tmp_path / "a", scalars_every=5, histograms=False)
    _fit(tiny_cnn(), raw, y, logger)
    (point,) = read_run(logger.run_path)[_tags.CONFIG_LINT]
    assert point.plugin == "text" and point.step == 1
    assert "unnormalized_input" in [f["id"] for f in json.loads(point.value)]
    # not instrumented: the model alone, at the start
    model_only = Logger(tmp_path / "b", scalars_every=0, histograms=False)
    _fit(tiny_cnn(), raw, y, model_only)
    (point,) = read_run(model_only.run_path)[_tags.CONFIG_LINT]
    assert point.step == 0 and json.loads(point.value) == []


def test_only_the_chief_writes(tmp_path, images, monkeypatch):
    from tfguard._distribute.multiworker import tf_config

    monkeypatch.setenv("TF_CONFIG", tf_config(["127.0.0.1:1", "127.0.0.1:2"], 1))  # worker 1
    x, y = images
    model = tiny_cnn()
    previous = signal.getsignal(signal.SIGTERM)
    handlers, periods = [], []

    class Spy(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            handlers.append(signal.getsignal(signal.SIGTERM))
            periods.extend(s.scalars_every for s in instrumentation_of(model).bus.subscriptions)

    logger = Logger(tmp_path / "logs", {"a": 1}, scalars_every=1)
    model.fit(x, y, batch_size=8, verbose=0, callbacks=[logger, Spy()])
    logger.close()
    assert not (tmp_path / "logs").exists() and logger.run_path is None
    assert periods and set(periods) == {1}  # subscribed: the same recording steps as the chief's
    assert handlers and all(h is previous for h in handlers)  # no SIGTERM flush either


def test_a_resumed_run_continues_in_place(tmp_path, images):
    import time

    from tensorboard.backend.event_processing import plugin_event_accumulator

    from tfguard.events import read_run as read_events

    x, y = images
    x = x.copy()
    x[20] = np.nan  # the third batch of every epoch is skipped
    first = tfguard.guard(tiny_cnn(), policy="skip", max_quarantined=0)
    _fit(first, x, y, Logger(tmp_path, run_subdir=False, scalars_every=1, histograms=False))
    time.sleep(1.1)  # a later process: a later event file name
    # A new process resumes from a checkpoint of step 3; the first one had written up to step 5.
    second = tfguard.guard(tiny_cnn(), policy="skip", max_quarantined=0)
    second.optimizer.iterations.assign(3)
    logger = Logger(tmp_path, run_subdir=False, scalars_every=1, histograms=False)
    _fit(second, x, y, logger)
    assert logger.run_path == str(tmp_path) and run_dirs(str(tmp_path)) == [str(tmp_path)]
    raw = read_run(str(tmp_path))
    assert steps(raw["batch/loss"]) == [1, 2, 3, 4, 5, 4, 5, 6, 7, 8]  # both files hold 4, 5

    run = read_events(tmp_path)
    assert run.scalars["batch/loss"][0].tolist() == list(range(1, 9))
    assert run.scalars[_tags.EPOCH][0].tolist() == [8]  # the killed session's epoch end was purged
    counted = run.scalars[_tags.GUARD_SKIPPED]
    # 1 skip at step 2 (first session), the second session's skip at step 5 makes 2, not 1
    assert dict(zip(counted[0].tolist(), counted[2].tolist())) == {2: 1.0, 5: 2.0, 8: 2.0}

    accumulator = plugin_event_accumulator.EventAccumulator(
        str(tmp_path), size_guidance={plugin_event_accumulator.TENSORS: 0}
    )
    accumulator.Reload()
    assert [e.step for e in accumulator.Tensors("batch/loss")] == list(range(1, 9))


@pytest.mark.parametrize("kwargs", [{"scalars_every": 0, "histograms": False},
                                    {"scalars_every": 0, "histograms": ["gradients"]},
                                    {"scalars_every": 2, "histograms": False}])
def test_steps_per_second_at_every_epoch_end(tmp_path, images, kwargs):
    x, y = images
    logger = Logger(tmp_path, **kwargs)
    _fit(tiny_cnn(), x, y, logger, epochs=2, validation_data=(x[:16], y[:16]))
    run = read_run(logger.run_path)
    points = {p.step: p.value for p in run[_tags.STEPS_PER_SECOND]}
    assert {6, 12} <= set(points) and all(v > 0 for v in points.values())


def test_only_the_histogram_kinds_asked_for_are_computed(tmp_path, images):
    x, y = images
    model = tiny_cnn()
    logger = Logger(tmp_path, scalars_every=0, histograms_every=2, histograms=["weights"])
    plans = {}

    class Spy(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            plans.update(instrumentation_of(model).plans)

    model.fit(x, y, batch_size=8, verbose=0, shuffle=False, callbacks=[logger, Spy()])
    plan = plans[frozenset({"scalars", "histograms"})]
    assert plan.histogram_keys == []  # no activation or gradient histogram in the step; the weights the host buckets
    assert plan.host_histograms and all(tag.startswith("hist/weights/") for tag, _ in plan.host_histograms)
    run = read_run(logger.run_path)
    assert steps(run["hist/weights/tiny/conv/kernel"]) == [1, 3, 5]


def test_every_violation_is_read_back_when_skipped_batches_share_a_step(tmp_path):
    """Under `skip` the optimizer does not move, so batches 0 and 1 both fail at step 0."""
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).random((128, 4)).astype("float32")
    x[[5, 20, 21, 70, 71, 72, 100, 101]] = np.nan  # batches of 16: 0, 1, 4, 6 in each epoch
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy")
    tfguard.guard(model, policy="skip", quarantine_dir=None)
    model.fit(x, np.arange(128) % 3, batch_size=16, epochs=2, shuffle=False, verbose=0,
              callbacks=[Logger(tmp_path, scalars_every=1)])
    (run,) = read_logdir(tmp_path).values()
    records = [json.loads(text) for _step, _wall, text in run.texts[_tags.GUARD_RECORDS]]
    assert [r["batch"] for r in records] == [0, 1, 4, 6, 8, 9, 12, 14]
    assert [step for step, _wall, _text in run.texts[_tags.GUARD_RECORDS]][:2] == [0, 0]
    assert run.scalars[_tags.GUARD_VIOLATIONS][2][-1] == len(records) == 8
    (diagnosis,) = diagnose_logdir(tmp_path)
    assert len(diagnosis.signals.guard_events) == 8


def test_a_large_update_logs_the_weight_norms_and_update_ratios_a_held_one_does(tmp_path, images, monkeypatch):
    """Above the hold limit an update's table is taken across its write (no held copy, no dry run): the same figures."""
    from tfguard._firewall import step as guarded_step
    from tfguard._hooks import dry_run

    taken = []
    across = dry_run.weight_table_across
    monkeypatch.setattr(dry_run, "weight_table_across", lambda *args: taken.append(args) or across(*args))
    x, y = images
    runs = {}
    for name, limit in (("held", guarded_step.HOLD_BYTES), ("across", 0)):
        monkeypatch.setattr(guarded_step, "HOLD_BYTES", limit)
        logger = Logger(tmp_path / name, scalars_every=2, histograms=False)
        _fit(tiny_cnn(), x, y, logger, epochs=2)
        runs[name] = read_run(logger.run_path)
        assert bool(taken) == (name == "across")
    wanted = [tag for tag in runs["held"] if tag.startswith(("weight_norm/", "update_ratio/"))]
    assert len(wanted) >= 4 and set(wanted) <= set(runs["across"])
    for tag in wanted:
        assert steps(runs["across"][tag]) == steps(runs["held"][tag]), tag
        np.testing.assert_allclose([p.value for p in runs["across"][tag]], [p.value for p in runs["held"][tag]],
                                   rtol=1e-5, err_msg=tag)
    assert all(0 < p.value < 1 for p in runs["across"]["update_ratio/conv"])


XLA_AND_MIRRORED_PROGRAM = """
import sys
import numpy as np, tensorflow as tf, keras
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
import tfguard
from tfguard import _tags
from tfguard._firewall import step
from tfguard.events import read_logdir
step.HOLD_BYTES = 0  # every update is 'large': its weight table is taken across its write
x = np.random.default_rng(0).random((64, 4), dtype=np.float32)
y = np.arange(64) % 3
for name in ("xla", "mirrored"):
    scope = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope() if name == "mirrored" else None
    with scope or tf.name_scope("plain"):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu", name="hidden"),
                                  keras.layers.Dense(3, activation="softmax", name="out")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", jit_compile=name == "xla")
    logger = tfguard.Logger(f"{sys.argv[1]}/{name}", scalars_every=1, histograms_every=1, histograms=["weights"])
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0, callbacks=[logger])
    (run,) = read_logdir(f"{sys.argv[1]}/{name}").values()
    ratios = list(run.scalars["update_ratio/hidden"][2])
    norms = list(run.scalars["weight_norm/hidden"][2])
    print(name, "RATIOS", len(ratios), all(0 < r < 1 for r in ratios), "NORMS", all(n > 0 for n in norms))
    variable = model.get_layer("hidden").kernel
    series = run.histograms[_tags.hist_weights(variable.path)]
    last, kernel = series[-1].buckets, variable.numpy()
    print(name, "STEPS", [point.step for point in series], "COUNT", int(last[:, 2].sum()) == kernel.size,
          "EDGES", bool(np.isclose(last[0, 0], kernel.min()) and np.isclose(last[-1, 1], kernel.max())))
"""


@pytest.fixture(scope="module")
def xla_and_mirrored(tmp_path_factory):
    """The stdout of one child that logs the same model under XLA and under MirroredStrategy (two logical CPUs)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", XLA_AND_MIRRORED_PROGRAM, str(tmp_path_factory.mktemp("child"))],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_a_large_update_logs_its_update_ratios_under_xla_and_under_mirrored_strategy(xla_and_mirrored):
    assert "xla RATIOS 4 True NORMS True" in xla_and_mirrored
    assert "mirrored RATIOS 4 True NORMS True" in xla_and_mirrored


def test_weight_histograms_taken_by_the_host_hold_under_xla_and_under_mirrored_strategy(xla_and_mirrored):
    # the host buckets the weights after the step, outside the graph: a compiled step and mirrored
    # variables give it the weights after each update, as the step itself did
    for name in ("xla", "mirrored"):
        assert f"{name} STEPS [1, 2, 3, 4] COUNT True EDGES True" in xla_and_mirrored, xla_and_mirrored
