import numpy as np
import pytest
import tensorflow as tf

from tfguard import GuardViolation, checks
from tfguard._errors import ContractError


def test_finite_counts_nan_posinf_neginf_separately():
    r = checks.finite()(tf.constant([1.0, np.nan, np.inf, -np.inf, -np.inf]), target="x")
    assert not bool(r.ok)
    values = {k: np.asarray(v) for k, v in r.tensors().items()}
    assert (int(values["nan"]), int(values["posinf"]), int(values["neginf"])) == (1, 1, 2)
    assert r.message(values) == "x failed check 'finite': 1 NaN, 1 +Inf, 2 -Inf of 5 values"


def test_finite_passes_clean_and_integer_tensors():
    assert bool(checks.finite()(tf.constant([1.0, 2.0])).ok)
    assert bool(checks.finite()(tf.constant([1, 2])).ok)


def test_in_range_counts_values_outside_and_reports_min_max():
    r = checks.in_range(0, 1)(tf.constant([-2.0, 0.5, 2.0]), target="pixels")
    values = {k: np.asarray(v) for k, v in r.tensors().items()}
    assert int(values["bad"]) == 2
    assert "outside [0, 1] (received min -2, max 2)" in r.message(values)


def test_in_range_rejects_bad_declarations():
    with pytest.raises(ContractError, match="low <= high"):
        checks.in_range(2, 1)
    with pytest.raises(ContractError, match="at least one"):
        checks.in_range()


def test_dtype_and_rank():
    assert not bool(checks.dtype("float32")(tf.constant([1], tf.int32)).ok)
    assert bool(checks.dtype("float32", "float16")(tf.constant([1.0], tf.float16)).ok)
    assert not bool(checks.rank(3)(tf.zeros([2, 4])).ok)
    assert bool(checks.rank(2)(tf.zeros([2, 4])).ok)


def test_predicate_with_message():
    positive = checks.predicate(lambda t: t > 0, "values must be positive", name="positive")
    with pytest.raises(GuardViolation, match="values must be positive \\(1 of 2 values fail\\)"):
        checks.check(tf.constant([1.0, -1.0]), positive, name="scale")


def test_labels_probabilities_and_one_hot():
    assert int(checks.labels(10)(tf.constant([0, 3, 12, -1])).bad) == 2
    assert int(checks.labels(10)(tf.constant([0.0, 2.5])).bad) == 1  # not a whole number
    assert bool(checks.probabilities()(tf.constant([[0.2, 0.8]])).ok)
    assert not bool(checks.probabilities()(tf.constant([[0.2, 0.9]])).ok)
    assert not bool(checks.one_hot()(tf.constant([[0.0, 1.0], [0.5, 0.5]])).ok)
    assert bool(checks.one_hot()(tf.constant([[0.0, 1.0], [1.0, 0.0]])).ok)


def test_check_raises_guard_violation_eagerly_with_names_and_counts():
    with pytest.raises(GuardViolation) as info:
        checks.check(tf.constant([np.nan, 1.0]), checks.finite(), name="logits")
    assert info.value.where == "logits"
    assert info.value.counts["nan"] == 1
    assert "logits failed check 'finite': 1 NaN" in str(info.value)


def test_check_inside_tf_function_fails_the_graph_with_the_same_message():
    @tf.function
    def f(t):
        with tf.control_dependencies([checks.check(t, checks.finite(), name="logits")]):
            return t * 2

    assert float(f(tf.constant([1.0]))[0]) == 2.0
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        f(tf.constant([np.nan]))
    assert "GuardViolation: check of" in str(info.value)
    assert "logits" in str(info.value) and "[nan] [1]" in str(info.value)
