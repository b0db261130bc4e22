"""``DataLoader``: arrays, batch size and shuffling for the compiled fit loop.

Batches are not produced in Python: the compiled loop shuffles an index array with the trainer's
own RNG and copies rows straight into the arena. The loader validates the data once and keeps a
copy in the arena dtype.

Dtype rule (documented behaviour): ``X`` and ``y`` are converted to the model's arena dtype
(float32 by default). A float32 C-contiguous ``X`` is used as is; float64 or integer ``X`` is
cast once (a copy), and that copy is cached on the loader.
"""

from __future__ import annotations

import math

import numpy as np

from nnjit.checks import Int
from nnjit.data.augment import check_augment
from nnjit.data.images import ImageDataset


class DataLoader:
    """Training or validation data.

    Args:
        X: features, shape ``(N, F)``, finite numbers.
        y: targets: class indices ``(N,)``, one-hot ``(N, C)`` or regression targets ``(N, K)``.
        batch_size: rows per step (>= 1). The last batch is shorter unless ``drop_last``.
        shuffle: reshuffle the rows every epoch (training only).
        drop_last: skip the short last batch.
        augment: an :class:`~nnjit.data.Augment` (random crop, horizontal flip) for the training
            batches of image data; None: the ImageDataset's own; False: none (validation never
            augments).

    ``X`` may be an :class:`~nnjit.data.ImageDataset` (then without ``y``: it holds its labels).
    """

    def __init__(self, X, y=None, batch_size: int = 32, shuffle: bool = True,
                 drop_last: bool = False, augment=None):
        Int(min=1).check("DataLoader: batch_size", batch_size)
        image_dims = None  # (C, H, W) when the rows are images
        if isinstance(X, ImageDataset):
            if y is not None:
                raise ValueError("DataLoader: an ImageDataset holds its labels: pass no y")
            dataset, augment = X, X.augment if augment is None else augment
            X, y, image_dims = dataset.flat_images(), dataset.labels, dataset.image_dims
        self.image_dims = image_dims
        self.augment = check_augment(augment, image_dims, "DataLoader")
        self.X = check_features(X, "DataLoader: X")
        self.y = None if y is None else check_targets(y, len(self.X), "DataLoader: y")
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self._cache: dict = {}

    def __len__(self) -> int:
        """Number of batches per epoch."""
        n = len(self.X)
        return n // self.batch_size if self.drop_last and n >= self.batch_size else -(
            -n // self.batch_size)

    @property
    def n_samples(self) -> int:
        return len(self.X)

    def features(self, dtype) -> np.ndarray:
        """X in the arena dtype, C-contiguous (cached), finite after the cast."""
        key = ("X", np.dtype(dtype))
        if key not in self._cache:
            self._cache[key] = to_arena(self.X, dtype, f"{type(self).__name__}: X")
        return self._cache[key]

    def targets(self, loss, n_outputs: int, dtype) -> np.ndarray:
        """y prepared by ``loss`` for a model with ``n_outputs`` outputs (cached)."""
        if self.y is None:
            raise ValueError("DataLoader: this loader has no targets (y=None)")
        key = ("y", type(loss), n_outputs, np.dtype(dtype))
        if key not in self._cache:
            self._cache[key] = loss.prepare_targets(self.y, n_outputs, dtype, "DataLoader: y")
        return self._cache[key]

    def __repr__(self) -> str:
        return (f"DataLoader(n_samples={len(self.X)}, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, drop_last={self.drop_last}"
                + (f", augment={self.augment}" if self.augment is not None else "") + ")")


def check_features(X, where: str) -> np.ndarray:
    """Validate a feature matrix: 2-D, non-empty, numeric, finite."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"{where} must be 2-D (samples, features), got shape {X.shape}")
    if X.shape[0] == 0:
        raise ValueError(f"{where} is empty (0 samples)")
    if X.shape[1] == 0:
        raise ValueError(f"{where} has no features (shape {X.shape})")
    if X.dtype.kind not in "iufb":
        raise ValueError(f"{where} must be numeric, got dtype {X.dtype}")
    if not all_finite(X):
        row, col = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(f"{where} contains NaN or inf (first at row {row}, column {col})")
    return X


def check_targets(y, n: int, where: str) -> np.ndarray:
    """Validate targets: 1-D or 2-D, one row per sample, finite."""
    y = np.asarray(y)
    if y.ndim not in (1, 2):
        raise ValueError(f"{where} must be 1-D or 2-D, got shape {y.shape}")
    if len(y) != n:
        raise ValueError(f"{where} has {len(y)} rows but X has {n}")
    if y.dtype.kind not in "iufb":
        raise ValueError(f"{where} must be numeric, got dtype {y.dtype}")
    if not all_finite(y):
        row = int(np.flatnonzero(~np.isfinite(y.reshape(n, -1)).all(axis=1))[0])
        raise ValueError(f"{where} contains NaN or inf (first at row {row})")
    return y


def to_arena(a: np.ndarray, dtype, where: str) -> np.ndarray:
    """``a`` as a C-contiguous array of the arena ``dtype``, checked finite AFTER the cast: a
    float64 value beyond float32's range passes a check made before it and becomes inf."""
    dtype = np.dtype(dtype)
    if a.dtype.kind != "f" or a.dtype.itemsize <= dtype.itemsize:
        return np.ascontiguousarray(a, dtype=dtype)  # (exact or widening: finite stays finite)
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(a, dtype=dtype)
    if not all_finite(out):
        flat = int(np.flatnonzero(~np.isfinite(out.reshape(-1)))[0])
        row, col = divmod(flat, out.shape[1]) if out.ndim == 2 else (flat, 0)
        value = a.reshape(-1)[flat].item()
        raise ValueError(f"{where} has a value beyond {dtype}'s range (first at row {row}, column "
                         f"{col}: {value!r}), which would be inf in the model's {dtype} arena; "
                         f"rescale the data or use Trainer(dtype=np.float64)")
    return out


def all_finite(a: np.ndarray) -> bool:
    """True unless the float array ``a`` holds a NaN or an inf (other kinds always pass).

    Looks at two elements instead of ``np.isfinite(a).all()``: ``argmax``/``argmin`` return the
    first NaN when there is one, else the largest (+inf) and smallest (-inf) element. They are
    plain array methods: a ufunc and its reduction cost ~30 us the first time a fit uses them
    with cold CPU caches (the benchmark's case), more than the work on a small data set.
    """
    if a.dtype.kind != "f" or a.size == 0:
        return True
    if a.dtype.itemsize > 8:  # long double: its finite extremes need not fit a Python float
        return bool(np.isfinite(a).all())
    return math.isfinite(a.item(a.argmax())) and math.isfinite(a.item(a.argmin()))
