import pytest
import tensorflow as tf

from tfguard import checks
from tfguard._errors import ContractError


def test_shared_symbolic_dimension_binds_across_tensors():
    spec = checks.shapes({"query": ("B", "T", "D"), "key": ("B", "S", "D")})
    ok = spec({"query": tf.zeros([2, 5, 8]), "key": tf.zeros([2, 7, 8])})
    assert [bool(r.ok) for r in ok] == [True, True]
    bad = spec({"query": tf.zeros([2, 5, 8]), "key": tf.zeros([3, 7, 4])})
    assert [bool(r.ok) for r in bad] == [True, False]
    values = {k: v.numpy() for k, v in bad[1].tensors().items()}
    assert "expected shape (B, S, D), received (3, 7, 4)" in bad[1].message(values)


def test_fixed_none_and_leading_ellipsis():
    assert bool(checks.shape((None, 28, 28, 1))({"tensor": tf.zeros([8, 28, 28, 1])})[0].ok)
    assert not bool(checks.shape((None, 28, 28, 1))({"tensor": tf.zeros([8, 28, 28])})[0].ok)
    assert bool(checks.shape(("...", 3))({"tensor": tf.zeros([2, 4, 3])})[0].ok)
    assert not bool(checks.shape(("...", 3))({"tensor": tf.zeros([2, 4, 2])})[0].ok)


def test_shapes_work_with_unknown_dimensions_inside_tf_function():
    spec = checks.shapes({"a": ("B", 4), "b": ("B",)})

    @tf.function(input_signature=[tf.TensorSpec([None, 4]), tf.TensorSpec([None])])
    def flags(a, b):
        return tf.stack([r.ok for r in spec({"a": a, "b": b})])

    assert flags(tf.zeros([3, 4]), tf.zeros([3])).numpy().tolist() == [True, True]
    assert flags(tf.zeros([3, 4]), tf.zeros([2])).numpy().tolist() == [True, False]


def test_malformed_specs_are_rejected():
    with pytest.raises(ContractError, match="'...' only first"):
        checks.shapes({"a": (2, "...")})
    with pytest.raises(ContractError, match="Received no tensor for 'b'"):
        checks.shapes({"b": (2,)})({"a": tf.zeros([2])})
