import gzip

import numpy as np
import pytest

from tfguard._errors import DataError
from tfguard.reference._idx import read_idx, write_idx


def test_round_trip_images_and_labels(tmp_path):
    images = np.arange(2 * 28 * 28, dtype=np.int64).reshape(2, 28, 28) % 256
    labels = np.array([7, 3], np.uint8)
    write_idx(tmp_path / "i.gz", images)
    write_idx(tmp_path / "l.gz", labels)
    got = read_idx(tmp_path / "i.gz", ndim=3)
    assert got.shape == (2, 28, 28) and got.dtype == np.uint8
    np.testing.assert_array_equal(got, images)
    np.testing.assert_array_equal(read_idx(tmp_path / "l.gz", ndim=1), labels)


def test_header_is_the_real_idx_format(tmp_path):
    write_idx(tmp_path / "l.gz", np.array([1, 2, 3], np.uint8))
    raw = gzip.decompress((tmp_path / "l.gz").read_bytes())
    assert raw[:8] == bytes([0, 0, 8, 1, 0, 0, 0, 3])  # magic 2049, 3 items
    assert raw[8:] == bytes([1, 2, 3])


def test_truncated_file_names_the_file(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    write_idx(path, np.zeros((3, 28, 28), np.uint8))
    data = gzip.decompress(path.read_bytes())
    with gzip.open(path, "wb") as f:
        f.write(data[:-10])
    with pytest.raises(DataError, match="train-images-idx3-ubyte.gz.*declares shape"):
        read_idx(path, ndim=3)


def test_swapped_files_are_reported(tmp_path):
    write_idx(tmp_path / "labels.gz", np.zeros(4, np.uint8))
    with pytest.raises(DataError, match=r"(?s)1 dimension.*expected 3.*swapped"):
        read_idx(tmp_path / "labels.gz", ndim=3)


def test_not_gzip(tmp_path):
    (tmp_path / "x.gz").write_bytes(b"plain text")
    with pytest.raises(DataError, match="gzip"):
        read_idx(tmp_path / "x.gz")


def test_write_rejects_values_outside_ubyte(tmp_path):
    with pytest.raises(DataError, match="outside"):
        write_idx(tmp_path / "x.gz", np.array([256]))
