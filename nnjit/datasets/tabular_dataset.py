"""The container of a built-in tabular classification data set: :class:`Dataset`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """A tabular classification dataset.

    Attributes
    ----------
    X : np.ndarray
        float32, shape ``(n_samples, n_features)``.
    y : np.ndarray
        int64, shape ``(n_samples,)``, class ids ``0 .. len(target_names) - 1``.
    feature_names : tuple[str, ...]
        One name per column of ``X``.
    target_names : tuple[str, ...]
        ``target_names[k]`` is the name of class ``k``.
    name : str
        The name :func:`load` knows it by.
    description : str
        Shape, source, licence and citation.

    The dataclass is frozen (the attributes cannot be rebound) but the arrays are ordinary
    writeable arrays owned by the caller. ``X, y = dataset`` unpacks the two arrays.
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    target_names: tuple[str, ...]
    name: str
    description: str

    def __iter__(self) -> Iterator[np.ndarray]:
        yield self.X
        yield self.y

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_classes(self) -> int:
        return len(self.target_names)

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, X={self.X.dtype}{self.X.shape}, "
            f"y={self.y.dtype}{self.y.shape}, n_classes={self.n_classes})"
        )
