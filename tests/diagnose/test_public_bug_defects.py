"""Defects of the diagnosis that the public-bug benchmark showed (issue 41, docs/diagnosis-benchmark.md).

Each defect is shown on a small program of the same shape, run under `tfguard run` as it is (the
benchmark's own programs are a development corpus, not tests), and each fix is checked on the
other side of its threshold: a run that learns, a healthy twin, a degenerate run.
"""

from __future__ import annotations

import numpy as np

from tfguard.diagnose import Signals, Thresholds
from tfguard.diagnose._rules.gradients import vanishing_gradient
from tfguard.diagnose._rules.optimizer import learning_rate
from tfguard.lint._validation_split import lint_validation_split

from . import user_programs as U

ALARMS = ("warning", "error")
TH = Thresholds()
STEPS = np.arange(1, 101)
ENDS = np.arange(25, 101, 25)


def _alarms(program: U.UserProgram, tmp_path) -> list:
    result = U.run(program, tmp_path)
    assert result.exit_code == 0, result.traceback
    return [f for d in result.diagnoses for f in d.findings if f.severity in ALARMS]


# -- a deep sigmoid network at chance: its gradients vanish, whatever their absolute size ------
DEEP_SIGMOID = U.UserProgram("deep_sigmoid_at_chance", "vanishing_gradient", """
    init = keras.initializers.VarianceScaling(2.0, "fan_in", "normal")
    model = keras.Sequential([keras.Input((64,))]
                             + [keras.layers.Dense(32, activation="sigmoid", kernel_initializer=init)
                                for _ in range(9)]
                             + [keras.layers.Dense(10, activation="softmax", kernel_initializer=init)])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(digits_x / 2.0, digits_y, epochs=4, batch_size=32, verbose=0)
""", also=("no_learning", "collapsed_output"))


def test_deep_sigmoid_network_at_chance_gets_vanishing_gradient_first(tmp_path):
    # before: the first layer's norm (1.4e-4, 1/4000 of the last layer's) was above AUTOTRAINER's
    # absolute bound 1e-4, so nothing named the cause and collapsed_output came first
    alarms = _alarms(DEEP_SIGMOID, tmp_path)
    assert [f.id for f in alarms][:1] == ["vanishing_gradient"], [(f.id, f.severity) for f in alarms]
    first = alarms[0]
    assert first.evidence["first_norm"] >= TH.vanish_first_norm  # the case the absolute bound missed
    assert "at chance" in first.message and first.evidence["chance_best_accuracy"] < 0.15
    assert all(f.id in DEEP_SIGMOID.also for f in alarms[1:]), [f.id for f in alarms]


def _gradients(first_norm: float, accuracy: list[float]) -> Signals:
    return Signals.from_arrays(
        {"grad_norm/dense": (STEPS, np.full(100, first_norm)),
         "grad_norm/dense_1": (STEPS, np.full(100, 0.05)),
         "grad_norm/out": (STEPS, np.full(100, 1.0)),
         "train/accuracy": (ENDS, accuracy), "train/loss": (ENDS, [2.3, 2.0, 1.5, 1.0])},
        epoch_end_steps=ENDS,
        model={"output_units": 10, "output_activation": "softmax",
               "loss": {"name": "SparseCategoricalCrossentropy", "class": "SparseCategoricalCrossentropy"}})


def test_vanishing_ratio_alone_only_counts_in_a_run_at_chance():
    # the same norms (first layer 5e-4, 1/2000 of the last) in a run that learns: the absolute
    # bound still applies, no finding
    assert vanishing_gradient(_gradients(5e-4, [0.3, 0.6, 0.8, 0.9]), TH) == []
    (f,) = vanishing_gradient(_gradients(5e-4, [0.09, 0.1, 0.11, 0.1]), TH)
    assert f.severity == "warning" and f.evidence["chance_best_accuracy"] == 0.11
    # a dead network's first layer gets no gradient at all: the ratio is 0, as before
    (dead,) = vanishing_gradient(_gradients(0.0, [0.1, 0.1, 0.1, 0.1]), TH)
    assert dead.evidence["first_norm"] == 0.0 and "at chance" not in dead.message


# -- a run NaN from its second step: the one update it made was far larger than the weights ------
_DIGITS_784 = """
    x = np.pad(np.kron(digits_x.reshape(-1, 8, 8) / 16.0, np.ones((3, 3))),
               ((0, 0), (2, 2), (2, 2))).reshape(-1, 784)
    x = (x * np.sqrt(88.0 / (x ** 2).sum(axis=1).mean())).astype("float32")
    y = keras.utils.to_categorical(digits_y, 10)
    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(
        10, activation="softmax", kernel_initializer="zeros", bias_initializer="zeros")])
    def summed_cross_entropy(y_true, y_pred):  # summed over the batch, not averaged
        return -keras.ops.sum(y_true * keras.ops.log(y_pred))
"""
SUMMED_LOSS = U.UserProgram("summed_loss_sgd", "learning_rate", _DIGITS_784 + """
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss=summed_cross_entropy, metrics=["accuracy"])
    model.fit(x, y, batch_size=205, epochs=4, verbose=0)
""", also=("nonfinite",))
MEAN_LOSS = U.UserProgram("mean_loss_sgd", None, _DIGITS_784 + """
    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, batch_size=205, epochs=4, verbose=0)
""")


def test_run_nan_from_step_two_names_the_learning_rate_first(tmp_path):
    # before: `nonfinite` alone; the loss never climbed (472, then NaN), so the loss-jump test
    # could not see the step size, and one update ratio is too few for persistence
    alarms = _alarms(SUMMED_LOSS, tmp_path)
    assert [f.id for f in alarms] == ["learning_rate", "nonfinite"], [(f.id, f.message) for f in alarms]
    lr, nan = alarms
    assert lr.severity == "error" and lr.evidence["code"] == "fatal_update"
    assert lr.evidence["update_ratio"] >= TH.update_ratio_fatal and lr.where.startswith("dense")
    assert "SGD's learning rate is 0.01" in lr.message
    assert nan.cause == lr.key and "most likely because SGD's learning rate is 0.01" in nan.message


def test_the_same_rate_on_a_mean_loss_stays_quiet(tmp_path):
    assert _alarms(MEAN_LOSS, tmp_path) == []


def _dies(ratios: list[float], loss: list[float]) -> Signals:
    steps = np.arange(1, len(loss) + 1)
    return Signals.from_arrays({"batch/loss": (steps, loss), "grad_norm/global": (steps, loss),
                                "update_ratio/dense": (steps[: len(ratios)], ratios)},
                               epoch_end_steps=[20], model={"optimizer": {"class": "SGD", "learning_rate": 0.01}})


def test_fatal_update_needs_a_large_update_right_before_an_early_death():
    nan = [np.nan] * 10
    (f,) = learning_rate(_dies([4.8], [472.0] + nan), TH)
    assert f.evidence["code"] == "fatal_update" and f.onset_step == 1
    # a NaN out of a normal-sized update (a bad record, a log(0)) is not a step size
    assert learning_rate(_dies([1e-3, 1e-3], [2.3, 2.3] + nan), TH) == []
    # a NaN from the first step (no finite update before it) says nothing of the step size
    assert learning_rate(_dies([np.nan], [np.nan] * 11), TH) == []
    # a death after the first epoch is not the step size's alone (the loss-jump window)
    late = [2.3] * 30 + nan
    assert learning_rate(_dies([1e-3] * 29 + [4.8], late), TH) == []


# -- a validation set of one example says nothing about generalization ---------------------------
def _memorizer(validation: int) -> U.UserProgram:
    return U.UserProgram(f"memorizer_val{validation}", None, f"""
        rng = np.random.default_rng(1)
        x = rng.normal(size=(300 + {validation}, 20)).astype("float32")
        y = rng.integers(0, 2, size=300 + {validation})  # labels unrelated to x: only memorized
        model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(128, activation="relu"),
                                  keras.layers.Dense(1, activation="sigmoid")])
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy",
                      metrics=["accuracy"])
        model.fit(x[:300], y[:300], epochs=12, batch_size=32, verbose=0,
                  validation_data=(x[300:], y[300:]))
    """)


def test_a_validation_set_of_one_example_is_not_judged_for_overfitting(tmp_path):
    # before: 'overfitting' (a warning) from the loss of one example (d4ml-086's published fix)
    result = U.run(_memorizer(1), tmp_path)
    assert result.exit_code == 0, result.traceback
    (diagnosis,) = result.diagnoses
    assert "overfitting" not in diagnosis.ids
    reasons = [r["reason"] for r in diagnosis.rules_skipped if r["id"] == "overfitting"]
    assert reasons and "a validation set of 1 example(s) is too small" in reasons[0], diagnosis.rules_skipped


def test_a_validation_set_large_enough_still_shows_overfitting(tmp_path):
    alarms = _alarms(_memorizer(200), tmp_path)
    assert "overfitting" in [f.id for f in alarms], [(f.id, f.message) for f in alarms]


# -- batch size 1: the first loss is one example's, not a reference for a jump -------------------
def _blobs_at_batch_size_one(optimizer: str) -> U.UserProgram:
    return U.UserProgram("blobs_batch1", None, f"""
        from sklearn.datasets import make_blobs
        x, y = make_blobs(n_samples=700, centers=3, n_features=2, cluster_std=2, random_state=2)
        x = x.astype("float32")  # features of about +-15, as in AUTOTRAINER's blob case
        keras.utils.set_random_seed(5)  # its first example's loss is 0.001, the next ones' about 3
        he = keras.initializers.VarianceScaling(2.0, "fan_in", "uniform")
        model = keras.Sequential([keras.Input((2,)),
                                  keras.layers.Dense(50, activation="relu", kernel_initializer=he),
                                  keras.layers.Dense(3, activation="softmax")])
        model.compile(optimizer={optimizer}, loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
        model.fit(x, y, epochs=2, batch_size=1, verbose=0)
    """)


def test_adam_at_batch_size_one_is_not_told_its_rate_is_far_too_high(tmp_path):
    # before: 'learning_rate' error, "the training loss rose to 10x its first value": the first
    # value was one example's loss (AUTOTRAINER's oscillating-loss case, fixed with Adam)
    alarms = _alarms(_blobs_at_batch_size_one('"adam"'), tmp_path)
    assert "learning_rate" not in [f.id for f in alarms], [(f.id, f.message) for f in alarms]


def test_a_rate_that_diverges_at_batch_size_one_is_still_far_too_high(tmp_path):
    alarms = _alarms(_blobs_at_batch_size_one("keras.optimizers.SGD(1.0)"), tmp_path)
    assert [f.id for f in alarms][:1] == ["learning_rate"], [(f.id, f.message) for f in alarms]
    lr = alarms[0]  # the message states the figure the rule compared
    if "reference_loss" in lr.evidence and lr.evidence["code"] == "loss_jump":
        assert "the median of its first 5 values" in lr.message


# -- validation_split on class-sorted data: validation classes training never sees ---------------
def _sorted_digits(shuffle: bool) -> U.UserProgram:
    return U.UserProgram(f"sorted_digits_shuffle_{shuffle}", "pipeline_order" if not shuffle else None, f"""
        keep = digits_y < 5
        order = np.argsort(digits_y[keep], kind="stable")  # stored sorted by class
        x, y = digits_x[keep][order] / 16.0, keras.utils.to_categorical(digits_y[keep][order], 5)
        if {shuffle}:
            p = np.random.default_rng(0).permutation(len(x))
            x, y = x[p], y[p]
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(5, activation="softmax")])
        model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
        model.fit(x, y, batch_size=32, epochs=6, validation_split=0.2, verbose=0)
    """, also=("overfitting",))


def test_validation_split_of_class_sorted_data_is_named_first(tmp_path):
    # before: 'overfitting' alone (d4ml-091): the validation loss rose because the validation part
    # held class 4, which training never saw
    alarms = _alarms(_sorted_digits(shuffle=False), tmp_path)
    assert [f.id for f in alarms][:1] == ["pipeline_order"], [(f.id, f.message) for f in alarms]
    first = alarms[0]
    assert first.severity == "error" and "class(es) 4, of which the 721 training examples hold only 1" in first.message
    assert first.evidence["validation_examples"] == 180
    assert all(f.id in ("pipeline_order", "overfitting", "no_learning") for f in alarms)


def test_validation_split_of_shuffled_data_stays_quiet(tmp_path):
    assert _alarms(_sorted_digits(shuffle=True), tmp_path) == []


def test_validation_split_check_reads_only_class_ids():
    sorted_ids = np.repeat(np.arange(5), 40)
    assert lint_validation_split(sorted_ids.astype("float32"), 0.2)[0].evidence["held_out_classes"] == [4]
    assert lint_validation_split(np.eye(5)[sorted_ids], 0.2)[0].evidence["held_out_classes"] == [4]
    assert lint_validation_split(np.linspace(0, 1, 200), 0.2) == []  # sorted regression targets
    assert lint_validation_split(np.eye(5)[sorted_ids] * 0.9, 0.2) == []  # soft labels
    # a rare class whose 3 examples a shuffle put in the validation part: chance, not sorted data
    rare = np.r_[np.zeros(197, int), [1, 1, 1]]
    assert lint_validation_split(rare, 0.2) == []
    assert lint_validation_split(sorted_ids, 0.0) == [] and lint_validation_split(sorted_ids, None) == []


# -- raw inputs and a rate 50x its default: the rate is named first -----------------------------
def _raw_pixels(rate: float) -> U.UserProgram:
    return U.UserProgram(f"raw_pixels_sgd_{rate}", "learning_rate" if rate >= 0.3 else "unnormalized_input", f"""
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer=keras.optimizers.SGD({rate}), loss="sparse_categorical_crossentropy")
        model.fit(digits_x * 16, digits_y, epochs=4, batch_size=32, verbose=0)
    """)


def test_a_rate_far_above_its_default_comes_before_raw_inputs(tmp_path):
    # before: unnormalized_input (a warning) first, learning_rate (an error, SGD 0.5 = 50x its
    # default) second (tfpb-so-ips13, -15: the published fixes lower the rate, the inputs stay raw)
    ids = [f.id for f in _alarms(_raw_pixels(0.5), tmp_path)]
    assert ids[:2] == ["learning_rate", "unnormalized_input"], ids


def test_an_ordinary_rate_on_raw_inputs_leaves_the_inputs_first(tmp_path):
    ids = [f.id for f in _alarms(_raw_pixels(0.05), tmp_path)]  # SGD 0.05: 5x its default
    assert ids[:1] == ["unnormalized_input"], ids
