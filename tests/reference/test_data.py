import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tfguard._errors import DataError
from tfguard.reference import load_data
from tfguard.reference._data import FASHION_MNIST_FILES, fashion_mnist_dir, load_fashion_mnist
from tfguard.reference._idx import write_idx

# -- digits ----------------------------------------------------------------------------


def test_digits_are_28x28_uint8_and_deterministic():
    a = load_data("digits")
    b = load_data("digits")
    assert a.x_train.shape == (1437, 28, 28, 1) and a.x_test.shape == (360, 28, 28, 1)
    assert a.x_train.dtype == np.uint8 and a.y_train.dtype == np.int32
    assert a.x_train.min() == 0 and a.x_train.max() == 255
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    info = a.info
    assert (info.input_shape, info.num_classes, info.dtype, info.value_range) == (
        (28, 28, 1),
        10,
        "uint8",
        (0, 255),
    )
    assert info.class_names == tuple("0123456789")
    assert set(np.unique(a.y_test)) == set(range(10))  # stratified


def test_digits_are_real_digits_with_aligned_labels():
    data = load_data("digits")
    x_tr = data.x_train.reshape(len(data.x_train), -1).astype(np.float32)
    x_te = data.x_test.reshape(len(data.x_test), -1).astype(np.float32)
    centroids = np.stack([x_tr[data.y_train == k].mean(0) for k in range(10)])
    pred = np.argmin(((x_te[:, None] - centroids[None]) ** 2).sum(-1), axis=1)
    assert (pred == data.y_test).mean() > 0.85


def test_limit_is_a_deterministic_subset(digits_small):
    full = load_data("digits")
    assert len(digits_small.x_train) == 200 and len(digits_small.x_test) == 200
    again = load_data("digits", limit=200)
    np.testing.assert_array_equal(again.x_train, digits_small.x_train)
    flat = {x.tobytes() for x in full.x_train}
    assert all(x.tobytes() in flat for x in digits_small.x_train)
    with pytest.raises(DataError, match="expected a positive integer or None. Received: limit=0"):
        load_data("digits", limit=0)


def test_unknown_spec():
    with pytest.raises(
        DataError, match="expected one of digits, fashion_mnist.*Received: data='mnist'"
    ):
        load_data("mnist")


# -- Fashion-MNIST ---------------------------------------------------------------------


def write_fashion(folder, n_train=6, n_test=4, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {
        "train-labels-idx1-ubyte.gz": rng.integers(0, 10, n_train, dtype=np.uint8),
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, n_test, dtype=np.uint8),
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
    }
    for name, array in arrays.items():
        write_idx(folder / name, array)
    return arrays


def test_fashion_mnist_missing_names_files_and_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "kh"))
    folder = tmp_path / "kh" / "datasets" / "fashion-mnist"
    with pytest.raises(DataError) as err:
        load_data("fashion_mnist")
    message = str(err.value)
    assert all(name in message for name in FASHION_MNIST_FILES)
    assert f"{folder}/" in message and "never downloads" in message
    assert err.value.hint and "KERAS_HOME" in err.value.hint


def test_fashion_mnist_names_only_the_missing_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    write_fashion(fashion_mnist_dir())
    (fashion_mnist_dir() / "t10k-images-idx3-ubyte.gz").unlink()
    with pytest.raises(DataError, match=r"missing t10k-images-idx3-ubyte.gz in "):
        load_fashion_mnist()


def test_fashion_mnist_reads_idx_files_in_keras_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    arrays = write_fashion(tmp_path / "datasets" / "fashion-mnist")
    data = load_data("fashion_mnist")
    assert data.x_train.shape == (6, 28, 28, 1) and data.x_test.shape == (4, 28, 28, 1)
    np.testing.assert_array_equal(data.x_train[..., 0], arrays["train-images-idx3-ubyte.gz"])
    np.testing.assert_array_equal(data.y_test, arrays["t10k-labels-idx1-ubyte.gz"])
    assert data.info.class_names[9] == "Ankle boot" and data.info.hflip_safe


def test_fashion_mnist_corrupt_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    folder = tmp_path / "datasets" / "fashion-mnist"
    write_fashion(folder)
    write_idx(folder / "train-images-idx3-ubyte.gz", np.zeros((6, 28), np.uint8))
    with pytest.raises(DataError, match="train-images-idx3-ubyte.gz.*2 dimension"):
        load_data("fashion_mnist")


def test_fashion_mnist_through_keras_own_loader(tmp_path):
    """KERAS_HOME set before Keras is imported: Keras's loader reads the cache, no download."""
    arrays = write_fashion(tmp_path / "datasets" / "fashion-mnist", n_train=5, n_test=3)
    code = (
        "import json\n"
        "from tfguard.reference._data import fashion_mnist_dir, load_data\n"
        "from tfguard.reference._loaders.fashion_mnist import _is_keras_own_cache\n"
        "d = load_data('fashion_mnist')\n"
        "print(json.dumps({'keras_path': _is_keras_own_cache(fashion_mnist_dir()),"
        " 'shape': list(d.x_train.shape), 'sum': int(d.x_train.sum()),"
        " 'y_test': d.y_test.tolist()}))\n"
    )
    env = {**os.environ, "KERAS_HOME": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["keras_path"] is True
    assert got["shape"] == [5, 28, 28, 1]
    assert got["sum"] == int(arrays["train-images-idx3-ubyte.gz"].sum())
    assert got["y_test"] == arrays["t10k-labels-idx1-ubyte.gz"].tolist()
    assert sorted(p.name for p in (tmp_path / "datasets" / "fashion-mnist").iterdir()) == sorted(
        FASHION_MNIST_FILES
    )


# -- npz -------------------------------------------------------------------------------


def test_npz_uint8_with_test_split(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "mine.npz"
    np.savez(
        path,
        x_train=rng.integers(0, 256, (20, 12, 12), dtype=np.uint8),
        y_train=np.arange(20) % 4,
        x_test=rng.integers(0, 256, (8, 12, 12), dtype=np.uint8),
        y_test=(np.arange(8) % 4).reshape(8, 1),
        class_names=np.array(["a", "b", "c", "d"]),
    )
    data = load_data(f"npz:{path}")
    assert data.x_train.shape == (20, 12, 12, 1) and data.y_test.shape == (8,)
    assert data.info.name == "npz-mine" and data.info.spec == f"npz:{path.resolve()}"
    assert data.info.dtype == "uint8" and data.info.value_range == (0, 255)
    assert data.info.class_names == ("a", "b", "c", "d") and data.info.num_classes == 4


def test_npz_float_inputs_get_their_range_and_a_split(tmp_path):
    path = tmp_path / "f.npz"
    x = np.random.default_rng(0).random((50, 6), dtype=np.float32)
    np.savez(path, x_train=x, y_train=np.arange(50) % 5)
    data = load_data(f"npz:{path}")
    assert (len(data.x_train), len(data.x_test)) == (40, 10)
    assert data.info.dtype == "float32" and data.info.value_range == (0.0, 1.0)
    assert data.info.input_shape == (6,)


@pytest.mark.parametrize(
    "arrays, match",
    [
        ({"x_train": np.zeros((3, 4))}, r"lacks the array\(s\) y_train"),
        (
            {"x_train": np.zeros((3, 4)), "y_train": np.zeros(3, int), "x_test": np.zeros((1, 4))},
            "y_test",
        ),
        ({"x_train": np.zeros((3, 4)), "y_train": np.zeros(3)}, "integer class ids"),
        ({"x_train": np.zeros((3, 4)), "y_train": np.zeros(2, int)}, "differ in length"),
        ({"x_train": np.full((3, 4), np.nan), "y_train": np.zeros(3, int)}, "NaN or Inf"),
        ({"x_train": np.zeros((3, 4)), "y_train": -np.ones(3, int)}, "negative labels"),
    ],
)
def test_npz_errors(tmp_path, arrays, match):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(DataError, match=match):
        load_data(f"npz:{path}")


def test_npz_refuses_pickled_objects(tmp_path):
    path = tmp_path / "obj.npz"
    np.savez(path, x_train=np.array([{"a": 1}], dtype=object), y_train=np.zeros(1, int))
    with pytest.raises(DataError, match="allow_pickle=False"):
        load_data(f"npz:{path}")


def test_npz_missing_file(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_data(f"npz:{tmp_path / 'nope.npz'}")


# -- image folders ---------------------------------------------------------------------


def write_pngs(folder, classes=("cat", "dog", "eel"), per_class=5, size=(20, 16)):
    import tensorflow as tf

    rng = np.random.default_rng(0)
    for k, name in enumerate(classes):
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            image = np.full((*size, 3), 40 * k, np.uint8) + rng.integers(
                0, 20, (*size, 3), dtype=np.uint8
            )
            (folder / name / f"{i}.png").write_bytes(tf.io.encode_png(image).numpy())


def test_image_dir(tmp_path):
    write_pngs(tmp_path / "imgs")
    data = load_data(f"dir:{tmp_path / 'imgs'}")
    assert data.x_train.shape[1:] == (28, 28, 1) and data.x_train.dtype == np.uint8
    assert len(data.x_train) + len(data.x_test) == 15 and len(data.x_test) == 3
    assert data.info.class_names == ("cat", "dog", "eel") and data.info.num_classes == 3
    # grayscale values follow the class brightness: labels are aligned with images
    means = [data.x_train[data.y_train == k].mean() for k in range(3)]
    assert means == sorted(means)


def test_image_dir_with_train_and_test(tmp_path):
    write_pngs(tmp_path / "d" / "train", per_class=3)
    write_pngs(tmp_path / "d" / "test", per_class=2)
    data = load_data(f"dir:{tmp_path / 'd'}", color_mode="rgb", image_size=(16, 16))
    assert data.x_train.shape == (9, 16, 16, 3) and data.x_test.shape == (6, 16, 16, 3)


def test_image_dir_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_data(f"dir:{tmp_path / 'missing'}")
    (tmp_path / "empty" / "a").mkdir(parents=True)
    with pytest.raises(DataError, match="images"):
        load_data(f"dir:{tmp_path / 'empty'}")
