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
    writeable arrays owned by the caller. It reads as the pair ``(X, y)``, like scikit-learn's
    ``return_X_y=True`` tuples: ``X, y = dataset``, ``dataset[0]`` is ``X``, ``dataset[1]`` is
    ``y`` and ``len(dataset)`` is 2.
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

    def __len__(self) -> int:
        return 2  # (X, y): the pair it unpacks as, not the number of samples (n_samples)

    def __getitem__(self, index: int) -> np.ndarray:
        """``(X, y)[index]``: ``dataset[0]`` is X, ``dataset[1]`` (or ``[-1]``) is y."""
        return (self.X, self.y)[index]

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
