"""The container of a data set that comes with its own train / test split: :class:`TrainTest`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False, repr=False)
class TrainTest:
    """A classification data set with a fixed train / test split (e.g. Fashion-MNIST).

    Attributes
    ----------
    X_train, X_test : np.ndarray
        Samples, float (images ``(N, C, H, W)`` or flat ``(N, features)``).
    y_train, y_test : np.ndarray
        int64 class ids ``0 .. len(target_names) - 1``.
    target_names : tuple[str, ...]
        ``target_names[k]`` is the name of class ``k``.
    name : str
        Short name of the data set.
    description : str
        Shape, source, licence and citation.

    ``X_train, X_test, y_train, y_test = data`` unpacks the four arrays in the order of
    :func:`~nnjit.datasets.train_test_split`. The arrays are ordinary writeable arrays owned by
    the caller.
    """

    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    target_names: tuple[str, ...]
    name: str
    description: str

    def __iter__(self) -> Iterator[np.ndarray]:
        yield self.X_train
        yield self.X_test
        yield self.y_train
        yield self.y_test

    @property
    def n_classes(self) -> int:
        return len(self.target_names)

    def __repr__(self) -> str:
        return (f"TrainTest(name={self.name!r}, X_train={self.X_train.dtype}{self.X_train.shape}, "
                f"X_test={self.X_test.dtype}{self.X_test.shape}, n_classes={self.n_classes})")
