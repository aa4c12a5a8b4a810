import keras
import numpy as np
import pytest
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard.lint._dataset import is_batched, lint_dataset

AUTOTUNE = tf.data.AUTOTUNE


@pytest.fixture
def base(digits):
    """Real digits as a tf.data source: (8, 8, 1) images in [0, 1] and class ids."""
    x, y = digits
    return tf.data.Dataset.from_tensor_slices(((x[:256] / 16.0).reshape(-1, 8, 8, 1), y[:256]))


def augment(x, y):
    return tf.image.random_flip_left_right(x), y


def scale(x, y):
    return tf.cast(x, tf.float32) * 2.0 - 1.0, y


def codes(findings):
    return [f.code for f in findings]


def test_well_built_pipelines_give_no_finding(base):
    pipelines = [
        base.cache()
        .shuffle(256)
        .batch(32)
        .map(augment, num_parallel_calls=AUTOTUNE)
        .prefetch(AUTOTUNE),
        base.map(scale, num_parallel_calls=AUTOTUNE)
        .cache()
        .shuffle(256)
        .repeat()
        .batch(32)
        .prefetch(2),
        base.shuffle(256).batch(32).prefetch(AUTOTUNE).with_options(tf.data.Options()),
        base.batch(32).unbatch().shuffle(256).batch(32).prefetch(AUTOTUNE),
        base.repeat(1).shuffle(64).batch(32).prefetch(AUTOTUNE),
        base.shuffle(256).cache().shuffle(256).batch(32).prefetch(AUTOTUNE),
    ]
    for ds in pipelines:
        assert lint_dataset(ds) == [], [op for op in codes(lint_dataset(ds))]


def test_shuffle_after_batch_names_op_and_position(base):
    (f,) = lint_dataset(base.batch(32).shuffle(8).prefetch(AUTOTUNE))
    assert (f.id, f.code, f.severity) == ("pipeline_order", "shuffle_after_batch", "warning")
    assert f.evidence["op"] == "ShuffleDatasetV3"
    assert f.evidence["position"] == 2
    assert f.evidence["batch_position"] == 1
    assert f.evidence["chain"] == [
        "TensorSliceDataset",
        "BatchDatasetV2",
        "ShuffleDatasetV3",
        "PrefetchDataset",
    ]
    assert "ShuffleDatasetV3" in f.where and "position 2 of 4" in f.where


def test_shuffle_after_padded_batch(base):
    ds = base.padded_batch(16).shuffle(4).prefetch(AUTOTUNE)
    assert codes(lint_dataset(ds)) == ["shuffle_after_batch"]


def test_shuffle_after_batch_really_freezes_batches(base):
    """The warning describes real behaviour: the same examples stay together every epoch."""
    indexed = tf.data.Dataset.range(64)
    frozen = indexed.batch(8).shuffle(8)
    epochs = [{tuple(sorted(b.numpy().tolist())) for b in frozen} for _ in range(2)]
    assert epochs[0] == epochs[1]
    mixed = indexed.shuffle(64, seed=1).batch(8)
    assert {tuple(sorted(b.numpy().tolist())) for b in mixed} != {
        tuple(sorted(b.numpy().tolist())) for b in mixed
    }
    assert codes(lint_dataset(frozen.prefetch(1))) == ["shuffle_after_batch"]


def test_cache_after_random_map(base):
    ds = (
        base.map(augment, num_parallel_calls=AUTOTUNE)
        .cache()
        .shuffle(256)
        .batch(32)
        .prefetch(AUTOTUNE)
    )
    (f,) = lint_dataset(ds)
    assert (f.code, f.severity) == ("cache_after_random_map", "warning")
    assert f.evidence["op"] == "CacheDatasetV2"
    assert f.evidence["map_op"] == "ParallelMapDatasetV2"
    assert f.evidence["map_position"] == 1 and f.evidence["position"] == 2
    assert "RandomUniform" in f.evidence["random_ops"]


def test_cache_after_keras_augmentation_layer(base):
    flip = keras.layers.RandomFlip("horizontal")
    ds = base.map(lambda x, y: (flip(x, training=True), y), num_parallel_calls=AUTOTUNE)
    assert codes(lint_dataset(ds.cache().shuffle(64).batch(8).prefetch(1))) == [
        "cache_after_random_map"
    ]


def test_cache_after_random_map_really_freezes_augmentation():
    ds = tf.data.Dataset.range(4).map(lambda i: tf.random.uniform([])).cache()
    first, second = list(ds.as_numpy_iterator()), list(ds.as_numpy_iterator())
    assert first == second
    assert codes(lint_dataset(ds.prefetch(1))) == ["cache_after_random_map", "sequential_map"]


def test_cache_after_shuffle(base):
    (f,) = lint_dataset(base.shuffle(256).cache().batch(32).prefetch(AUTOTUNE))
    assert (f.code, f.evidence["shuffle_position"], f.evidence["position"]) == (
        "cache_after_shuffle",
        1,
        2,
    )
    ds = tf.data.Dataset.range(16).shuffle(16).cache()
    assert list(ds.as_numpy_iterator()) == list(ds.as_numpy_iterator())


def test_shuffle_buffer_of_one(base):
    (f,) = lint_dataset(base.shuffle(1).batch(32).prefetch(AUTOTUNE))
    assert (f.code, f.evidence["buffer_size"]) == ("shuffle_buffer_too_small", 1)


def test_repeat_before_shuffle_is_info(base):
    (f,) = lint_dataset(base.repeat().shuffle(256).batch(32).prefetch(AUTOTUNE))
    assert (f.code, f.severity, f.evidence["repeat_count"]) == ("repeat_before_shuffle", "info", -1)


def test_sequential_map_and_interleave(base):
    (f,) = lint_dataset(base.map(scale).shuffle(256).batch(32).prefetch(AUTOTUNE))
    assert (f.code, f.severity, f.evidence["auto_parallelized"]) == ("sequential_map", "info", True)
    options = tf.data.Options()
    options.experimental_optimization.map_parallelization = False
    (g,) = lint_dataset(base.map(scale).batch(32).prefetch(1).with_options(options))
    assert g.evidence["auto_parallelized"] is False
    files = tf.data.Dataset.range(3).interleave(lambda i: tf.data.Dataset.range(i))
    assert codes(lint_dataset(files.prefetch(1))) == ["sequential_interleave"]


def test_prefetch_missing_or_not_last(base):
    (f,) = lint_dataset(base.shuffle(256).batch(32))
    assert (f.code, f.severity, f.evidence["op"]) == ("no_prefetch", "info", "BatchDatasetV2")
    (g,) = lint_dataset(base.shuffle(256).prefetch(AUTOTUNE).batch(32))
    assert (g.code, g.evidence["prefetch_position"]) == ("prefetch_not_last", 2)


def test_zip_branches_are_checked_once(rng):
    a = tf.data.Dataset.from_tensor_slices(rng.random((16, 2))).batch(4).shuffle(4)
    b = tf.data.Dataset.range(16).batch(4)
    (f,) = lint_dataset(tf.data.Dataset.zip((a, b)).prefetch(1))
    assert f.code == "shuffle_after_batch"
    assert f.evidence["chain"][0] == "TensorSliceDataset"


def test_generator_source_is_python_in_the_pipeline(rng):
    ds = tf.data.Dataset.from_generator(
        lambda: iter(range(8)), output_signature=tf.TensorSpec([], tf.int64)
    )
    (finding,) = lint_dataset(ds.shuffle(8).batch(2).prefetch(1))
    assert (finding.id, finding.code, finding.severity) == ("python_in_pipeline", "generator_source",
                                                            "warning")
    assert "from_tensor_slices" in finding.suggestion and "GIL" in finding.message


def clip_pixels(x):
    """A NumPy stage users write: the common one has a TensorFlow op."""
    return np.clip(x, 0, 255).astype(np.float32)


@pytest.mark.parametrize("wrap", ["py_function", "numpy_function"])
def test_a_python_map_is_named_with_its_cost_and_the_tf_rewrite(wrap):
    call = getattr(tf, wrap)
    ds = tf.data.Dataset.range(16).map(
        lambda x: call(clip_pixels, [x], tf.float32), num_parallel_calls=tf.data.AUTOTUNE
    ).batch(4).prefetch(tf.data.AUTOTUNE)
    (finding,) = lint_dataset(ds)
    assert (finding.id, finding.code) == ("python_in_pipeline", "python_map")
    assert "clip_pixels" in finding.message and "SavedModel" in finding.message
    assert "tf.clip_by_value" in finding.suggestion
    assert finding.evidence["python_ops"] == (["EagerPyFunc"] if wrap == "py_function" else ["PyFunc"])


def test_a_pure_tensorflow_pipeline_has_no_python_finding():
    ds = tf.data.Dataset.range(16).map(lambda x: tf.cast(x, tf.float32) / 255.0,
                                      num_parallel_calls=tf.data.AUTOTUNE)
    assert lint_dataset(ds.shuffle(16).batch(4).prefetch(tf.data.AUTOTUNE)) == []


def test_is_batched(base):
    assert is_batched(base.batch(4).prefetch(1))
    assert not is_batched(base.shuffle(4))
    assert not is_batched(base.batch(4).unbatch())


def test_not_a_dataset_raises():
    with pytest.raises(ContractError, match="tf.data.Dataset"):
        lint_dataset(np.zeros(3))
