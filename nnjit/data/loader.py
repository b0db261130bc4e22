"""``DataLoader``: arrays, batch size and shuffling for the compiled fit loop.

Batches are not produced in Python: the compiled loop shuffles an index array with the trainer's
own RNG and copies rows straight into the arena. The loader validates the data once and keeps a
copy in the arena dtype.

``X`` is one array or a tuple of arrays, one per argument of ``forward`` (``forward(self, x_num,
x_cat)`` takes ``DataLoader((X_num, X_cat), y)``), each with one row per sample; an array of more
than 2 dims reaches the model in its own shape (``(N, C, H, W)`` as ``(B, C, H, W)``), see
:mod:`nnjit.data.inputs`.

Dtype rule (documented behaviour): float and bool inputs, and ``y``, are converted to the model's
arena dtype (float32 by default). A float32 C-contiguous 2-D ``X`` is used as is; float64 ``X`` is
cast once (a copy), and that copy is cached on the loader. An input of an integer dtype stays
integer (indices for an ``Embedding``; stored as int32 bits in a float32 arena, int64 in float64):
cast it with ``X.astype(np.float32)`` to feed it to float layers, as in PyTorch.
"""

from __future__ import annotations

import numpy as np

from nnjit.checks import Int
from nnjit.data.augment import check_augment
from nnjit.data.images import ImageDataset
from nnjit.data.inputs import InputSpec, Inputs, all_finite, to_arena
from nnjit.data.sequences import SequenceDataset

__all__ = ["DataLoader", "all_finite", "check_features", "check_targets", "to_arena"]


class DataLoader:
    """Training or validation data.

    Args:
        X: features, shape ``(N, F)`` (or ``(N, C, H, W)``, ...), finite numbers; or a tuple of
            such arrays with the same ``N``, one per input of the model's ``forward``.
        y: targets: class indices ``(N,)``, one-hot ``(N, C)`` or regression targets ``(N, K)``.
        batch_size: rows per step (>= 1). The last batch is shorter unless ``drop_last``.
        shuffle: reshuffle the rows every epoch (training only).
        drop_last: skip the short last batch.
        augment: an :class:`~nnjit.data.Augment` (random crop, horizontal flip) for the training
            batches of image data; None: the ImageDataset's own; False: none (validation never
            augments).

    ``X`` may be an :class:`~nnjit.data.ImageDataset` or a :class:`~nnjit.data.SequenceDataset`
    (then without ``y``: it holds its labels; a SequenceDataset's inputs are ``(tokens,
    lengths)``).
    """

    def __init__(self, X, y=None, batch_size: int = 32, shuffle: bool = True,
                 drop_last: bool = False, augment=None):
        Int(min=1).check("DataLoader: batch_size", batch_size)
        image_dims = None  # (C, H, W) when the rows are images
        if isinstance(X, SequenceDataset):
            if y is not None:
                raise ValueError("DataLoader: a SequenceDataset holds its labels: pass no y")
            X, y = X.inputs, X.labels
        elif isinstance(X, ImageDataset):
            if y is not None:
                raise ValueError("DataLoader: an ImageDataset holds its labels: pass no y")
            dataset, augment = X, X.augment if augment is None else augment
            X, y, image_dims = dataset.images, dataset.labels, dataset.image_dims
        self._inputs = X if isinstance(X, Inputs) else Inputs(X, "DataLoader: X")
        self.X = self._inputs.arrays if self._inputs.multi else self._inputs.arrays[0]
        specs = self._inputs.specs
        if image_dims is None and len(specs) == 1 and len(specs[0].dims) == 3:
            image_dims = specs[0].dims  # (an (N, C, H, W) array)
        self.image_dims = image_dims
        self.augment = check_augment(augment, image_dims, "DataLoader")
        self.y = None if y is None else check_targets(y, self._inputs.n_rows, "DataLoader: y")
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self._cache: dict = {}

    _inputs: Inputs | None = None  # (graph loaders set X themselves: one float input)

    def __len__(self) -> int:
        """Number of batches per epoch."""
        n = self.n_samples
        return n // self.batch_size if self.drop_last and n >= self.batch_size else -(
            -n // self.batch_size)

    @property
    def n_samples(self) -> int:
        return self._inputs.n_rows if self._inputs is not None else len(self.X)

    @property
    def inputs(self) -> Inputs | None:
        """The checked input arrays (None for a graph's loaders, whose X is node features)."""
        return self._inputs

    @property
    def input_specs(self) -> tuple[InputSpec, ...]:
        """Each input's row shape and kind, in ``forward``'s argument order."""
        if self._inputs is not None:
            return self._inputs.specs
        return (InputSpec((int(self.X.shape[1]),)),)

    def features(self, dtype) -> np.ndarray:
        """The inputs packed into one C-contiguous ``(N, total columns)`` matrix of the arena
        dtype (cached), floats finite after the cast, integer inputs as integer bits."""
        key = ("X", np.dtype(dtype))
        if key not in self._cache:
            self._cache[key] = (self._inputs.packed(dtype) if self._inputs is not None else
                                to_arena(self.X, dtype, f"{type(self).__name__}: X"))
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
        return (f"DataLoader(n_samples={self.n_samples}, batch_size={self.batch_size}, "
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
