"""scikit-learn's MLP targets as the compiled loop reads them.

The estimators encode labels with scikit-learn's own ``LabelBinarizer`` (as its MLPs do: string,
boolean, multi-label targets all become 0/1 columns); this turns that encoding into the arena's
target rows, and turns the validation loss into scikit-learn's regression score.
"""

from __future__ import annotations

import numpy as np


def engine_targets(y: np.ndarray, out_activation: str, dtype,
                   sample_weight: np.ndarray | None = None) -> np.ndarray:
    """The target rows for the output ``out_activation`` (scikit-learn's ``out_activation_``):
    the class index column (N, 1) under softmax (``y`` is one-hot), else ``y`` itself (binary
    or multi-label 0/1 columns, regression targets), then the ``sample_weight`` column when
    given, C-contiguous in the arena ``dtype``."""
    y = np.asarray(y)
    if y.ndim == 1:
        y = y.reshape(-1, 1)
    if out_activation == "softmax":
        y = np.argmax(y, axis=1).reshape(-1, 1)
    if sample_weight is not None:
        return np.ascontiguousarray(np.column_stack([y, sample_weight]), dtype=dtype)
    return np.ascontiguousarray(y, dtype=dtype)


def r2_per_half_square(y_val: np.ndarray, sample_weight: np.ndarray | None = None) -> float:
    """``s`` with scikit-learn's validation score R^2 = 1 - s * L, where L is the (weighted)
    mean over rows of the regressor's loss (half the mean square over the outputs):
    ``2 k W / SST``, W the weight sum (the rows), SST weighted as scikit-learn's ``r2_score``.

    Exact for one output. With several, scikit-learn averages R^2 over the outputs
    (``multioutput="uniform_average"``), which no single loss value gives: this is the
    variance-weighted R^2 instead. 0 when the targets are constant (R^2 undefined).
    """
    y = np.asarray(y_val, dtype=np.float64)
    if y.ndim == 1:
        y = y.reshape(-1, 1)
    if sample_weight is None:
        sst, total = float(((y - y.mean(axis=0)) ** 2).sum()), float(y.shape[0])
    else:
        w = np.asarray(sample_weight, dtype=np.float64)
        total = float(w.sum())
        if total <= 0.0:
            return 0.0
        sst = float((w[:, None] * (y - np.average(y, axis=0, weights=w)) ** 2).sum())
    return 2.0 * total * y.shape[1] / sst if sst > 0.0 else 0.0
