"""Fashion-MNIST from the user's files (not bundled): :func:`load_fashion_mnist`."""

from __future__ import annotations

import os

import numpy as np

from nnjit.datasets.idx import read_idx
from nnjit.datasets.train_test import TrainTest

#: The class names, in label order (Xiao et al. 2017).
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                         "Shirt", "Sneaker", "Bag", "Ankle boot")

#: The four IDX files of the standard distribution (each may also end in ``.gz``).
IDX_FILES = {"x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
             "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte"}

_SIDE = 28
_DESCRIPTION = """\
Fashion-MNIST (Zalando Research): 70,000 grey 28x28 images of 10 clothing classes, the
original split of 60,000 training and 10,000 test images, in file order.
Read from {source}.
Licence: MIT, (c) 2017 Zalando SE. Cite: H. Xiao, K. Rasul, R. Vollgraf, "Fashion-MNIST: a
Novel Image Dataset for Benchmarking Machine Learning Algorithms", arXiv:1708.07747 (2017)."""


def load_fashion_mnist(path, *, flatten: bool = False, dtype=np.float32) -> TrainTest:
    """Fashion-MNIST from ``path``: a folder holding the four standard IDX files
    (``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``,
    ``t10k-labels-idx1-ubyte``, each raw or ``.gz``), or an ``.npz`` archive with ``x_train``,
    ``y_train``, ``x_test``, ``y_test`` (images uint8 ``(N, 784)`` or ``(N, 28, 28)``).

    nnjit does not ship or download the data.

    Args:
        path: the folder or the ``.npz`` file.
        flatten: False (default): images ``(N, 1, 28, 28)`` (NCHW, for ``Conv2d``); True:
            ``(N, 784)`` rows (for an MLP).
        dtype: float dtype of the images (default float32); pixel values are divided by 255,
            so they lie in ``[0, 1]``.

    Returns:
        A :class:`~nnjit.datasets.TrainTest`: ``X_train`` (60000 images), ``X_test`` (10000),
        ``y_train``/``y_test`` int64 in ``0..9``, ``target_names`` the 10 class names.
        ``X_train, X_test, y_train, y_test = load_fashion_mnist(path)`` unpacks it.

    The files are untrusted: the IDX headers are checked against the file sizes before reading,
    the archive is read without pickle, and shapes, pixel and label ranges are checked; every
    error names the file.

    Raises:
        FileNotFoundError: no such file or folder, or a folder without the four IDX files.
        ValueError: a malformed file, wrong shapes or dtypes, or values out of range.
    """
    path = os.fspath(path)
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise ValueError(f"load_fashion_mnist: dtype must be a float dtype, got {dtype}")
    if os.path.isdir(path):
        arrays, where = _read_idx_folder(path), {k: _idx_path(path, f)
                                                  for k, f in IDX_FILES.items()}
    elif os.path.isfile(path):
        arrays, where = _read_npz(path), dict.fromkeys(IDX_FILES, path)
    else:
        raise FileNotFoundError(f"load_fashion_mnist: no such file or folder: {path}")
    parts = {}
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        parts[f"X_{split}"] = _images(x, where[f"x_{split}"], f"x_{split}", flatten, dtype)
        parts[f"y_{split}"] = _labels(y, where[f"y_{split}"], f"y_{split}")
        if len(x) != len(y):
            raise ValueError(f"load_fashion_mnist: {len(x)} {split} images "
                             f"({where[f'x_{split}']}) but {len(y)} labels "
                             f"({where[f'y_{split}']})")
    return TrainTest(**parts, target_names=FASHION_MNIST_CLASSES, name="fashion_mnist",
                     description=_DESCRIPTION.format(source=path))


def _idx_path(folder: str, stem: str) -> str | None:
    for name in (stem, stem + ".gz"):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def _read_idx_folder(folder: str) -> dict[str, np.ndarray]:
    paths = {key: _idx_path(folder, stem) for key, stem in IDX_FILES.items()}
    missing = [IDX_FILES[k] for k, p in paths.items() if p is None]
    if missing:
        raise FileNotFoundError(f"load_fashion_mnist: {folder} lacks {', '.join(missing)} "
                                "(raw or .gz)")
    return {key: read_idx(p, max_ndim=3) for key, p in paths.items()}


def _read_npz(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            if not hasattr(npz, "files"):
                raise ValueError("a single array, not an .npz archive")
            missing = [k for k in IDX_FILES if k not in npz.files]
            if missing:
                raise KeyError(", ".join(missing))
            return {key: npz[key] for key in IDX_FILES}
    except KeyError as e:
        raise ValueError(f"load_fashion_mnist: {path} lacks {e.args[0]} (expected arrays "
                         f"{', '.join(IDX_FILES)})") from None
    except (ValueError, OSError, EOFError) as e:
        raise ValueError(f"load_fashion_mnist: {path} is not a readable .npz archive of plain "
                         f"arrays ({e})") from None


def _images(x: np.ndarray, where: str, key: str, flatten: bool, dtype: np.dtype) -> np.ndarray:
    if x.dtype != np.uint8:
        raise ValueError(f"load_fashion_mnist: {key} in {where} must be uint8 pixels 0..255, got "
                         f"{x.dtype}")
    if x.ndim == 2 and x.shape[1] == _SIDE * _SIDE:
        pass
    elif x.shape[1:] not in ((_SIDE, _SIDE), (1, _SIDE, _SIDE)):
        raise ValueError(f"load_fashion_mnist: {key} in {where} has shape {x.shape}; expected "
                         f"(N, 784), (N, 28, 28) or (N, 1, 28, 28)")
    shape = (len(x), _SIDE * _SIDE) if flatten else (len(x), 1, _SIDE, _SIDE)
    out = x.reshape(shape).astype(dtype)
    out /= dtype.type(255)
    return out


def _labels(y: np.ndarray, where: str, key: str) -> np.ndarray:
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise ValueError(f"load_fashion_mnist: {key} in {where} must be a 1-D integer array, got "
                         f"{y.dtype} {y.shape}")
    if y.size and (y.min() < 0 or y.max() >= len(FASHION_MNIST_CLASSES)):
        raise ValueError(f"load_fashion_mnist: {key} in {where} holds labels outside 0..9 "
                         f"(min {y.min()}, max {y.max()})")
    return y.astype(np.int64)
