"""scikit-learn's MLP targets as the compiled loop reads them.

The estimators encode labels with scikit-learn's own ``LabelBinarizer`` (as its MLPs do: string,
boolean, multi-label targets all become 0/1 columns); this turns that encoding into the arena's
target rows, and turns the validation loss into scikit-learn's regression score.
"""

from __future__ import annotations

import numpy as np


def engine_targets(y: np.ndarray, out_activation: str, dtype) -> np.ndarray:
    """The target rows for the output ``out_activation`` (scikit-learn's ``out_activation_``):
    the class index column (N, 1) under softmax (``y`` is one-hot), else ``y`` itself (binary
    or multi-label 0/1 columns, regression targets), C-contiguous in the arena ``dtype``."""
    y = np.asarray(y)
    if y.ndim == 1:
        y = y.reshape(-1, 1)
    if out_activation == "softmax":
        return np.ascontiguousarray(np.argmax(y, axis=1).reshape(-1, 1), dtype=dtype)
    return np.ascontiguousarray(y, dtype=dtype)


def r2_per_half_square(y_val: np.ndarray) -> float:
    """``s`` with scikit-learn's validation score R^2 = 1 - s * L, where L is the mean over
    rows of the regressor's loss (half the mean square over the outputs): ``2 k n / SST``.

    Exact for one output. With several, scikit-learn averages R^2 over the outputs
    (``multioutput="uniform_average"``), which no single loss value gives: this is the
    variance-weighted R^2 instead. 0 when the targets are constant (R^2 undefined).
    """
    y = np.asarray(y_val, dtype=np.float64)
    if y.ndim == 1:
        y = y.reshape(-1, 1)
    sst = float(((y - y.mean(axis=0)) ** 2).sum())
    return 2.0 * y.shape[0] * y.shape[1] / sst if sst > 0.0 else 0.0
