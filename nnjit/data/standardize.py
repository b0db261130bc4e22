"""Feature standardisation with the training part's statistics: :func:`standardize`."""

from __future__ import annotations

from typing import Any

import numpy as np


def standardize(X_train: Any, *X_other: Any) -> np.ndarray | tuple[np.ndarray, ...]:
    """Standardise features with the **training** mean and standard deviation.

    Every input is transformed as ``(X - mean) / std`` with ``mean`` and ``std`` (population,
    ``ddof=0``) computed per feature over axis 0 of ``X_train`` only, so no statistic leaks
    from validation/test data. Features whose training std is 0 get std 1 (they become 0 in
    ``X_train``). Statistics are computed in float64; results are new arrays of
    ``X_train``'s floating dtype (float32 stays float32; integer input gives float64).

    Returns the standardised ``X_train`` alone when no other array is given, else a tuple
    ``(X_train_std, *X_other_std)`` in argument order::

        X_train, X_test = standardize(X_train, X_test)
        X_train, X_val, X_test = standardize(X_train, X_val, X_test)

    Raises ``ValueError`` if ``X_train`` has no rows, contains NaN/inf, or another array's
    trailing shape (``shape[1:]``) differs from ``X_train``'s; ``TypeError`` for
    non-numeric input.
    """
    Xt = np.asarray(X_train)
    if Xt.dtype.kind not in "biuf":
        raise TypeError(f"X_train must be numeric, got dtype {Xt.dtype}")
    if Xt.ndim == 0 or Xt.shape[0] == 0:
        raise ValueError(f"X_train must have at least one row, got shape {Xt.shape}")
    if not np.all(np.isfinite(Xt)):
        raise ValueError("X_train contains NaN or infinite values")
    dtype = Xt.dtype if Xt.dtype.kind == "f" else np.dtype(np.float64)

    x64 = Xt.astype(np.float64)
    mean = x64.mean(axis=0)
    std = x64.std(axis=0)
    std = np.where(std == 0.0, 1.0, std)  # constant features: divide by 1, not 0

    out = [((x64 - mean) / std).astype(dtype)]
    for i, other in enumerate(X_other, start=1):
        Xo = np.asarray(other)
        if Xo.dtype.kind not in "biuf":
            raise TypeError(f"argument {i} must be numeric, got dtype {Xo.dtype}")
        if Xo.ndim != Xt.ndim or Xo.shape[1:] != Xt.shape[1:]:
            want = "(n, " + ", ".join(map(str, Xt.shape[1:])) + ")" if Xt.ndim > 1 else "(n,)"
            raise ValueError(
                f"argument {i} has shape {Xo.shape}; expected {want} like X_train {Xt.shape}"
            )
        out.append(((Xo.astype(np.float64) - mean) / std).astype(dtype))
    return out[0] if not X_other else tuple(out)
