"""Splitting samples into training, validation and test parts: the same parts for the same seed.

- :func:`train_test_split`: arrays in, ``X_train, X_test, y_train, y_test`` out (scikit-learn's
  order; the test fraction rounded up; stratified by largest remainders; rows in random order).
  :mod:`nnjit.datasets` re-exports it, and ``nnjit train`` splits a built-in data set with it.
- :func:`split_rows`: ``n`` row positions in, the train / validation / test positions out
  (ascending; each fraction rounded to the nearest row; stratified so that every class keeps a
  training row). :meth:`nnjit.data.tabular.TabularDataset.from_dataframe` splits tables with it.
- :class:`Split`: the six arrays of a split, the base of ``TabularDataset`` and of the
  experiment's ``RunData``.

The two functions stay two algorithms on purpose: ``nnjit report`` re-splits a run's data with
the run's seed, so changing which rows a seed picks would evaluate old runs on training rows.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from nnjit.checks import is_int, is_real

__all__ = ["Split", "split_rows", "train_test_split"]


@dataclasses.dataclass(frozen=True, eq=False)
class Split:
    """Train / validation / test arrays (a part may have no rows)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    def evaluation(self) -> tuple[np.ndarray, np.ndarray, str]:
        """``(X, y, name)``: the test part when it has rows, else the validation part."""
        if len(self.X_test):
            return self.X_test, self.y_test, "test"
        return self.X_val, self.y_val, "validation"


# ------------------------------------------------------------------------- arrays: 2 parts
_NOT_GIVEN = object()  # marks an argument the caller did not pass


def train_test_split(
    X: Any,
    y: Any,
    test_size: float = 0.2,
    seed: int | None | np.random.Generator = 0,
    stratify: bool = True,
    *,
    random_state: Any = _NOT_GIVEN,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Shuffle and split ``X`` and ``y`` into train and test parts (pure NumPy).

    Parameters
    ----------
    X : array-like, shape ``(n_samples, ...)``
        Features; any number of trailing dimensions (e.g. images ``(n, 64, 64)``).
    y : array-like, shape ``(n_samples,)``
        Labels (any dtype NumPy can sort).
    test_size : float in ``(0, 1)`` or int
        Fraction of samples for the test part (rounded up, like scikit-learn) or an exact count.
    seed : int, None or numpy.random.Generator
        The same int always gives the same split. ``None`` draws fresh entropy.
    stratify : bool
        If true (default), every class appears in the test part in (as nearly as integers
        allow) the same proportion as in ``y``: class ``c`` with ``n_c`` samples gets
        ``floor`` or ``ceil`` of ``n_c * n_test / n_samples`` test samples, totals exact.
        Needs at least 2 samples per class.
    random_state : int, None or numpy.random.Generator, keyword only
        scikit-learn's name for ``seed``, accepted so that ``random_state=0`` works; give one
        of the two.

    Returns
    -------
    X_train, X_test, y_train, y_test : np.ndarray
        New arrays (copies); rows are in random order. Together the two parts hold every
        sample exactly once.

    Raises
    ------
    ValueError
        Mismatched lengths, ``y`` not 1-D, fewer than 2 samples, a ``test_size`` that leaves
        an empty part, or (stratified) a class with a single sample.
    TypeError
        ``test_size``, ``seed`` or ``stratify`` of the wrong type, or both ``seed`` and
        ``random_state`` given.
    """
    if random_state is not _NOT_GIVEN:
        if not (is_int(seed) and seed == 0):
            raise TypeError("train_test_split: give seed or random_state (its scikit-learn "
                            f"name), not both (seed={seed!r}, random_state={random_state!r})")
        seed = random_state
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim == 0:
        raise ValueError("X must have at least one dimension (n_samples, ...)")
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n_samples,), got shape {y.shape}")
    n = X.shape[0]
    if y.shape[0] != n:
        raise ValueError(f"X and y have different lengths: {n} != {y.shape[0]}")
    if n < 2:
        raise ValueError(f"need at least 2 samples to split, got {n}")
    if not isinstance(stratify, (bool, np.bool_)):
        raise TypeError(f"stratify must be True or False, got {type(stratify).__name__} "
                        "(True stratifies by y: scikit-learn's stratify=y)")
    n_test = _n_test(test_size, n)
    rng = _check_seed(seed)

    if not stratify:
        perm = rng.permutation(n)
        test_idx, train_idx = perm[:n_test], perm[n_test:]
    else:
        classes, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        if counts.min() < 2:
            bad = classes[counts < 2].tolist()
            raise ValueError(
                f"stratified split needs at least 2 samples per class; class(es) {bad} have 1 "
                "(pass stratify=False)"
            )
        take = _stratified_test_counts(counts, n_test, rng)
        by_class = np.argsort(inverse, kind="stable")
        starts = np.concatenate(([0], np.cumsum(counts)))
        test_parts, train_parts = [], []
        for c in range(len(classes)):
            members = rng.permutation(by_class[starts[c] : starts[c + 1]])
            test_parts.append(members[: take[c]])
            train_parts.append(members[take[c] :])
        test_idx = rng.permutation(np.concatenate(test_parts))
        train_idx = rng.permutation(np.concatenate(train_parts))

    return X[train_idx], X[test_idx], y[train_idx], y[test_idx]


def _check_seed(seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or is_int(seed):
        if seed is not None and int(seed) < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed}")
        return np.random.default_rng(None if seed is None else int(seed))
    raise TypeError(
        f"seed must be an int, None or a numpy.random.Generator, got {type(seed).__name__}"
    )


def _n_test(test_size: Any, n: int) -> int:
    if not is_real(test_size):
        raise TypeError(
            f"test_size must be a float in (0, 1) or an int count, got {type(test_size).__name__}"
        )
    if is_int(test_size):
        n_test = int(test_size)
        if not 1 <= n_test <= n - 1:
            raise ValueError(
                f"test_size={n_test} as a count must be between 1 and n_samples - 1 = {n - 1}"
            )
        return n_test
    ts = float(test_size)
    if not 0.0 < ts < 1.0:
        raise ValueError(f"test_size={test_size!r} as a fraction must be strictly between 0 and 1")
    n_test = math.ceil(ts * n)
    if not 1 <= n_test <= n - 1:
        raise ValueError(
            f"test_size={test_size!r} with n_samples={n} leaves {n_test} test and "
            f"{n - n_test} train samples; both must be at least 1"
        )
    return n_test


def _stratified_test_counts(
    counts: np.ndarray, n_test: int, rng: np.random.Generator
) -> np.ndarray:
    """Split ``n_test`` over classes proportionally to ``counts`` (largest remainder method,
    ties broken at random), so the totals are exact and each class is within 1 of its share."""
    counts = counts.astype(np.int64)
    n = int(counts.sum())
    take, remainder = np.divmod(counts * n_test, n)  # exact integer share: take + remainder / n
    left = n_test - int(take.sum())  # == remainder.sum() // n < number of classes
    if left:
        order = np.lexsort((rng.random(len(counts)), -remainder))
        take[order[:left]] += 1  # only classes with remainder > 0 get one more
    return take


# --------------------------------------------------------------------- row positions: 3 parts
def split_rows(n: int, val: float, test: float, seed: int, labels: np.ndarray | None = None,
               n_classes: int = 0, where: str = "split_rows"):
    """Positions ``0..n-1`` split into ``(train_rows, val_rows, test_rows)``, each ascending int64.

    The validation and test parts get ``round(val * n)`` and ``round(test * n)`` rows, drawn with
    ``numpy.random.default_rng(seed)``. With ``labels`` (int class indices ``0..n_classes-1``,
    one per row) the split is stratified: each part takes every class in proportion (largest
    remainders) and every class keeps at least one training row. ``where`` starts the error
    message (the caller's name). The caller checks ``val``, ``test`` and ``seed``.

    Raises:
        ValueError: the fractions leave no training row.
    """
    if labels is None:
        return _random_split(n, val, test, seed, where)
    return _stratified_split(labels, n_classes, val, test, seed, where)


def _split_sizes(n: int, val: float, test: float, where: str) -> tuple[int, int]:
    n_val, n_test = int(round(val * n)), int(round(test * n))
    if n - n_val - n_test < 1:
        raise ValueError(f"{where}: {n} rows leave no training rows with val={val}, "
                         f"test={test}")
    return n_val, n_test


def _random_split(n: int, val: float, test: float, seed: int, where: str):
    n_val, n_test = _split_sizes(n, val, test, where)
    order = np.random.default_rng(seed).permutation(n)
    test_rows = np.sort(order[:n_test])
    val_rows = np.sort(order[n_test:n_test + n_val])
    train_rows = np.sort(order[n_test + n_val:])
    return train_rows, val_rows, test_rows


def _allocate(total: int, weights: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Split ``total`` over classes in proportion to ``weights`` (largest remainder, capped)."""
    if total == 0:
        return np.zeros(len(weights), dtype=np.int64)
    exact = total * weights / weights.sum()
    counts = np.minimum(np.floor(exact).astype(np.int64), caps)
    remainder = exact - counts
    for k in np.argsort(-remainder, kind="stable"):
        if counts.sum() >= total:
            break
        if counts[k] < caps[k]:
            counts[k] += 1
    return counts


def _stratified_split(y: np.ndarray, n_classes: int, val: float, test: float, seed: int,
                      where: str):
    n_val, n_test = _split_sizes(len(y), val, test, where)
    rng = np.random.default_rng(seed)
    per_class = np.bincount(y, minlength=n_classes).astype(np.int64)
    caps = per_class - 1                     # every class keeps one training row
    test_counts = _allocate(n_test, per_class.astype(np.float64), caps)
    val_counts = _allocate(n_val, per_class.astype(np.float64), caps - test_counts)
    train, valid, tst = [], [], []
    for k in range(n_classes):
        rows = rng.permutation(np.flatnonzero(y == k))
        t, v = test_counts[k], val_counts[k]
        tst.append(rows[:t])
        valid.append(rows[t:t + v])
        train.append(rows[t + v:])
    return tuple(np.sort(np.concatenate(p)).astype(np.int64) for p in (train, valid, tst))
