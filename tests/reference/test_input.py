import numpy as np
import pytest
import tensorflow as tf

from tfguard._errors import ContractError
from tfguard.reference import make_augmenter, make_dataset, preprocess


def test_preprocess_is_x_over_255_for_uint8():
    raw = np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1)
    got = preprocess(raw).numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, raw.astype(np.float32) / np.float32(255))


def test_preprocess_other_range():
    got = preprocess(tf.constant([-1.0, 0.0, 3.0]), (-1, 3)).numpy()
    np.testing.assert_allclose(got, [0.0, 0.25, 1.0])


@pytest.mark.parametrize("bad", [(1, 1), (2, 1), (0,), "ab", None])
def test_preprocess_rejects_bad_range(bad):
    with pytest.raises(ContractError, match="expected \\(low, high\\) with low < high"):
        preprocess(tf.zeros([1]), bad)


def chain(ds):
    names = []
    while ds is not None:
        names.append(type(ds).__name__.lstrip("_"))
        ds = getattr(ds, "_input_dataset", None)
    return names[::-1]


def test_pipeline_order():
    x = np.zeros((8, 28, 28, 1), np.uint8)
    y = np.zeros(8, np.int64)
    train = make_dataset(x, y, batch_size=4, training=True, augment=make_augmenter((28, 28, 1)))
    assert chain(train) == [
        "TensorSliceDataset",
        "ParallelMapDataset",  # preprocess
        "CacheDataset",
        "ShuffleDataset",
        "BatchDataset",
        "ParallelMapDataset",  # augmentation, after the cache
        "PrefetchDataset",
    ]
    evaluation = make_dataset(x, y, batch_size=4)
    assert chain(evaluation) == [
        "TensorSliceDataset",
        "ParallelMapDataset",
        "CacheDataset",
        "BatchDataset",
        "PrefetchDataset",
    ]


def test_shuffle_is_before_batch_and_reshuffles_each_epoch():
    x = np.zeros((100, 2, 2, 1), np.uint8)
    y = np.arange(100)
    ds = make_dataset(x, y, batch_size=10, training=True)
    epoch1 = [b[1].numpy() for b in ds]
    epoch2 = [b[1].numpy() for b in ds]
    assert sorted(np.concatenate(epoch1).tolist()) == list(range(100))
    # batches made before shuffling would hold 10 consecutive labels
    assert any(np.ptp(b) > 9 for b in epoch1)
    assert not np.array_equal(np.concatenate(epoch1), np.concatenate(epoch2))


def test_evaluation_keeps_order_and_values_are_preprocessed():
    x = np.full((5, 2, 2, 1), 255, np.uint8)
    ds = make_dataset(x, np.arange(5), batch_size=2)
    images, labels = zip(*[(a.numpy(), b.numpy()) for a, b in ds], strict=True)
    assert np.concatenate(labels).tolist() == [0, 1, 2, 3, 4]
    assert all(i.dtype == np.float32 and i.max() == 1.0 for i in images)


def test_augmentation_is_random_each_epoch_after_the_cache():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (16, 28, 28, 1), dtype=np.uint8)
    ds = make_dataset(
        x, np.arange(16), batch_size=16, training=True, augment=make_augmenter((28, 28, 1), seed=1)
    )

    def by_label(batch):
        images, labels = batch
        return images.numpy()[np.argsort(labels.numpy())]

    first, second = by_label(next(iter(ds))), by_label(next(iter(ds)))
    assert first.shape == (16, 28, 28, 1)
    clean = x.astype(np.float32) / 255
    assert not np.allclose(first, clean)  # augmented
    # cached before augmentation: a new epoch draws new crops
    differs = [not np.array_equal(a, b) for a, b in zip(first, second, strict=True)]
    assert sum(differs) >= 8


def test_augmenter_flip_only_when_asked():
    assert [type(layer).__name__ for layer in make_augmenter((28, 28, 1)).layers] == [
        "ZeroPadding2D",
        "RandomCrop",
    ]
    assert type(make_augmenter((28, 28, 1), flip=True).layers[-1]).__name__ == "RandomFlip"
    with pytest.raises(ContractError, match="expected \\(height, width, channels\\)"):
        make_augmenter((784,))


def test_batch_size_must_be_positive():
    with pytest.raises(
        ContractError,
        match="Received an invalid value for `batch_size`, expected a positive integer. "
        "Received: batch_size=0",
    ):
        make_dataset(np.zeros((2, 1)), np.zeros(2), batch_size=0)
    with pytest.raises(ContractError, match="len\\(x\\)=2, len\\(y\\)=3"):
        make_dataset(np.zeros((2, 1)), np.zeros(3))
