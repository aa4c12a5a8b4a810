import numpy as np
import pytest
import tensorflow as tf

from tfguard import GuardViolation, checks
from tfguard._errors import ContractError


def contract():
    return checks.Contract(
        x=[checks.finite(), checks.in_range(0, 1)],
        y=[checks.labels(3)],
        shapes={"x": ("B", 2), "y": ("B",)},
    )


def test_contract_on_tensors_raises_naming_tensor_and_check():
    c = contract()
    c.check(x=tf.fill([4, 2], 0.5), y=tf.constant([0, 1, 2, 0]))
    with pytest.raises(GuardViolation) as info:
        c.check(x=tf.fill([4, 2], 2.0), y=tf.constant([0, 1, 2, 7]))
    text = str(info.value)
    assert "x failed check 'range': 8 of 8 values outside [0, 1]" in text
    assert "y failed check 'labels': 1 of 4 labels outside the class ids [0, 3)" in text
    assert info.value.where == "x"


def test_contract_as_tf_data_stage_raises_at_the_bad_element():
    x = np.full((6, 2), 0.5, np.float32)
    x[4, 1] = np.nan
    ds = tf.data.Dataset.from_tensor_slices((x, np.zeros(6, np.int64)))
    guarded = contract().apply(ds.batch(1), policy="raise")
    seen = 0
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        for _ in guarded:
            seen += 1
    assert seen == 4
    assert "GuardViolation: data contract at dataset element" in str(info.value)
    assert "[4]" in str(info.value)  # the element index
    assert "failed check" in str(info.value) and "finite" in str(info.value)


def test_contract_as_tf_data_stage_skips_bad_elements():
    x = np.full((6, 2), 0.5, np.float32)
    x[1] = 9.0
    y = np.array([0, 1, 2, 5, 0, 1])
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(1)
    kept = list(contract().apply(ds, policy="skip"))
    assert len(kept) == 4


def test_nested_inputs_are_checked_leaf_by_leaf():
    c = checks.Contract(x=[checks.finite()])
    failures = c.failures(x={"image": tf.constant([1.0]), "meta": tf.constant([np.inf])})
    assert [r.target for r in failures] == ["x/meta"]


def test_bad_declarations_are_contract_errors():
    with pytest.raises(ContractError, match="expected a tfguard.checks check"):
        checks.Contract(x=[lambda t: t])
    with pytest.raises(ContractError, match="'raise' or 'skip'"):
        checks.Contract(x=[checks.finite()]).apply(tf.data.Dataset.range(2), policy="drop")
