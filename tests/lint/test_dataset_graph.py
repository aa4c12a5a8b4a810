import keras
import numpy as np
import pytest
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard.lint._dataset_graph import is_random_op, read_dataset_graph

AUTOTUNE = tf.data.AUTOTUNE


@pytest.fixture
def images(rng):
    x = rng.random((32, 8, 8, 3)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, np.arange(32) % 4))


def test_chain_order_args_and_attrs(images):
    ds = (
        images.shuffle(32, reshuffle_each_iteration=False).batch(8, drop_remainder=True).prefetch(3)
    )
    chain = read_dataset_graph(ds).chain()
    assert [op.op for op in chain] == [
        "TensorSliceDataset",
        "ShuffleDatasetV3",
        "BatchDatasetV2",
        "PrefetchDataset",
    ]
    assert chain[1].args["buffer_size"] == 32
    assert chain[1].attrs["reshuffle_each_iteration"] is False
    assert chain[2].args == {"batch_size": 8, "drop_remainder": True}
    assert chain[3].args["buffer_size"] == 3
    assert chain[0].inputs == () and chain[1].inputs == (chain[0].name,)


def test_parallel_map_and_options(images):
    ds = images.map(lambda x, y: (x * 2.0, y), num_parallel_calls=AUTOTUNE).with_options(
        tf.data.Options()
    )
    chain = read_dataset_graph(ds).chain()
    assert [op.op for op in chain] == [
        "TensorSliceDataset",
        "ParallelMapDatasetV2",
        "OptionsDataset",
    ]
    assert chain[1].functions and not chain[1].is_random


def _flip_tf(x, y):
    return tf.image.random_flip_left_right(x), y


def _flip_stateless(x, y):
    return tf.image.stateless_random_flip_left_right(x, seed=(1, 2)), y


_GENERATOR = tf.random.Generator.from_seed(1)


def _noise_generator(x, y):
    return x + _GENERATOR.normal(tf.shape(x)), y


def _nested_random(x, y):
    return tf.cond(tf.reduce_sum(x) > 0, lambda: x + tf.random.uniform(tf.shape(x)), lambda: x), y


_KERAS_FLIP = keras.layers.RandomFlip("horizontal")


def _flip_keras(x, y):
    return _KERAS_FLIP(x, training=True), y


@pytest.mark.parametrize(
    "fn, expected",
    [
        (_flip_tf, "RandomUniform"),
        (_flip_stateless, "StatelessRandomUniformV2"),
        (_noise_generator, "RngReadAndSkip"),
        (_nested_random, "RandomUniform"),
        (_flip_keras, "StatelessRandomUniformV2"),
    ],
)
def test_random_ops_are_found_in_map_functions(images, fn, expected):
    ds = images.map(fn, num_parallel_calls=AUTOTUNE)
    op = read_dataset_graph(ds).chain()[-1]
    assert op.is_random
    assert expected in op.random_ops


def test_deterministic_map_has_no_random_ops(images):
    ds = images.map(lambda x, y: (tf.image.flip_left_right(x) / 2.0, y))
    assert read_dataset_graph(ds).chain()[-1].random_ops == ()


def test_zip_gives_one_path_per_branch(rng):
    a = tf.data.Dataset.from_tensor_slices(rng.random((8, 2))).batch(2)
    b = tf.data.Dataset.range(8).shuffle(8).batch(2)
    graph = read_dataset_graph(tf.data.Dataset.zip((a, b)).prefetch(1))
    paths = [[op.op for op in path] for path in graph.paths()]
    assert paths == [
        ["TensorSliceDataset", "BatchDatasetV2", "ZipDataset", "PrefetchDataset"],
        ["RangeDataset", "ShuffleDatasetV3", "BatchDatasetV2", "ZipDataset", "PrefetchDataset"],
    ]
    assert [op.op for op in graph.chain()] == paths[0]


def test_is_random_op():
    assert is_random_op("RandomStandardNormal")
    assert is_random_op("RngReadAndSkip")
    assert is_random_op("StatelessRandomNormalV2")
    assert not is_random_op("StatefulPartitionedCall")
    assert not is_random_op("AddV2")


def test_not_a_dataset_raises():
    with pytest.raises(ContractError, match="tf.data.Dataset"):
        read_dataset_graph([1, 2, 3])
