"""load_fashion_mnist: IDX folders (raw and gzip) and .npz archives, untrusted-file checks, and the
shared copy of the real data when it is present."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from nnjit.datasets import TrainTest, load, load_fashion_mnist
from nnjit.datasets.fashion_mnist import FASHION_MNIST_CLASSES, IDX_FILES
from nnjit.datasets.idx import IdxFormatError, read_idx

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "fashion_mnist.npz"


def idx_bytes(array: np.ndarray, code: int = 0x08) -> bytes:
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(">u1" if code == 0x08 else array.dtype).tobytes()


def tiny_arrays(seed=0, n_train=5, n_test=3):
    rng = np.random.default_rng(seed)
    return {"x_train": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
            "y_train": rng.integers(0, 10, n_train, dtype=np.uint8),
            "x_test": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
            "y_test": rng.integers(0, 10, n_test, dtype=np.uint8)}


def write_idx_folder(folder: Path, arrays: dict, gz: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for key, stem in IDX_FILES.items():
        data = idx_bytes(arrays[key])
        if gz:
            (folder / (stem + ".gz")).write_bytes(gzip.compress(data))
        else:
            (folder / stem).write_bytes(data)
    return folder


def check_matches(d: TrainTest, arrays: dict, flat: bool = False):
    assert isinstance(d, TrainTest) and d.target_names == FASHION_MNIST_CLASSES
    for split in ("train", "test"):
        x, y = getattr(d, f"X_{split}"), getattr(d, f"y_{split}")
        n = len(arrays[f"x_{split}"])
        assert x.shape == ((n, 784) if flat else (n, 1, 28, 28)) and x.dtype == np.float32
        np.testing.assert_array_equal(x.reshape(n, 28, 28) * 255,
                                      arrays[f"x_{split}"].astype(np.float32))
        assert y.dtype == np.int64
        np.testing.assert_array_equal(y, arrays[f"y_{split}"])


@pytest.mark.parametrize("gz", [False, True])
def test_idx_folder_raw_and_gzip(tmp_path, gz):
    arrays = tiny_arrays()
    d = load_fashion_mnist(write_idx_folder(tmp_path / "fm", arrays, gz))
    check_matches(d, arrays)
    X_train, X_test, y_train, y_test = d  # train_test_split's order
    assert X_train is d.X_train and y_test is d.y_test


def test_npz_flat_rows_and_flatten_option(tmp_path):
    arrays = tiny_arrays(1)
    flat = {k: (v.reshape(len(v), -1) if k.startswith("x") else v) for k, v in arrays.items()}
    np.savez(tmp_path / "fm.npz", **flat)
    check_matches(load_fashion_mnist(tmp_path / "fm.npz"), arrays)
    d = load_fashion_mnist(str(tmp_path / "fm.npz"), flatten=True, dtype=np.float64)
    assert d.X_train.shape == (5, 784) and d.X_train.dtype == np.float64
    assert 0.0 <= d.X_train.min() and d.X_train.max() <= 1.0


def test_npz_is_read_without_pickle(tmp_path):
    arrays = tiny_arrays()
    arrays["y_test"] = np.array([object()] * 3, dtype=object)
    np.savez(tmp_path / "evil.npz", **arrays)
    with pytest.raises(ValueError, match=r"evil\.npz.*not a readable"):
        load_fashion_mnist(tmp_path / "evil.npz")


@pytest.mark.parametrize("change, match", [
    (lambda a: a.pop("y_test"), r"lacks y_test"),
    (lambda a: a.update(x_train=a["x_train"].astype(np.float32)), r"x_train .* must be uint8"),
    (lambda a: a.update(x_train=a["x_train"][:, :27]), r"x_train .* has shape \(5, 27, 28\)"),
    (lambda a: a.update(y_train=a["y_train"] + 10), r"y_train .* labels outside 0\.\.9"),
    (lambda a: a.update(y_test=a["y_test"][:2]), r"3 test images .* but 2 labels"),
])
def test_npz_bad_contents_name_the_file(tmp_path, change, match):
    arrays = tiny_arrays()
    change(arrays)
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=match) as e:
        load_fashion_mnist(tmp_path / "bad.npz")
    assert "bad.npz" in str(e.value)


def test_missing_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        load_fashion_mnist(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"lacks train-images-idx3-ubyte"):
        load_fashion_mnist(tmp_path / "empty")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ValueError, match=r"text\.npz is not a readable"):
        load_fashion_mnist(tmp_path / "text.npz")


@pytest.mark.parametrize("gz", [False, True])
def test_idx_header_checked_against_file_size(tmp_path, gz):
    """A header claiming more data than the file holds is refused before any large read."""
    def write(name, data):
        path = tmp_path / (name + (".gz" if gz else ""))
        path.write_bytes(gzip.compress(data) if gz else data)
        return path

    good = idx_bytes(np.zeros((2, 28, 28), np.uint8))
    huge = bytes([0, 0, 8, 3]) + struct.pack(">3I", 4_000_000_000, 28, 28) + good[16:]
    with pytest.raises(IdxFormatError, match=r"huge.*header says 4000000000x28x28"):
        read_idx(write("huge", huge))
    with pytest.raises(IdxFormatError, match=r"short.*(truncated|holds only)"):
        read_idx(write("short", good[:-5]))
    with pytest.raises(IdxFormatError, match=r"long.*continues past"):
        read_idx(write("long", good + b"\0"))
    with pytest.raises(IdxFormatError, match=r"magic.*not an IDX file"):
        read_idx(write("magic", b"\x01" + good[1:]))
    with pytest.raises(IdxFormatError, match=r"code.*unknown IDX element type 0x07"):
        read_idx(write("code", good[:2] + b"\x07" + good[3:]))
    with pytest.raises(IdxFormatError, match=r"ndim.*0 dimensions"):
        read_idx(write("ndim", good[:3] + b"\x00"))
    with pytest.raises(IdxFormatError, match=r"tiny.*truncated"):
        read_idx(write("tiny", good[:2]))
    np.testing.assert_array_equal(read_idx(write("ok", good)), np.zeros((2, 28, 28)))


def test_idx_not_gzip_despite_name(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(idx_bytes(np.zeros((1, 28, 28), np.uint8)))
    with pytest.raises(IdxFormatError, match=r"idx3-ubyte\.gz: cannot read"):
        read_idx(path)


def test_idx_folder_with_wrong_dims(tmp_path):
    arrays = tiny_arrays()
    folder = write_idx_folder(tmp_path / "fm", arrays, gz=False)
    (folder / IDX_FILES["x_test"]).write_bytes(idx_bytes(np.zeros((3, 32, 32), np.uint8)))
    with pytest.raises(ValueError, match=r"x_test in .*t10k-images-idx3-ubyte has shape"):
        load_fashion_mnist(folder)


def test_not_loadable_by_name_points_to_the_loader():
    with pytest.raises(ValueError, match=r"load_fashion_mnist\(path\)"):
        load("fashion-mnist")


@pytest.mark.skipif(not SHARED.is_file(), reason="the shared Fashion-MNIST copy is not here")
def test_shared_copy():
    d = load_fashion_mnist(SHARED)
    assert d.X_train.shape == (60000, 1, 28, 28) and d.X_test.shape == (10000, 1, 28, 28)
    np.testing.assert_array_equal(d.y_train[:10], [9, 0, 0, 3, 0, 2, 7, 2, 5, 5])
    np.testing.assert_array_equal(d.y_test[:10], [9, 2, 1, 1, 6, 1, 4, 6, 5, 7])
    assert np.bincount(d.y_train).tolist() == [6000] * 10
    assert abs(float(d.X_train.mean(dtype=np.float64)) - 0.2860) < 1e-4
