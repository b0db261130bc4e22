"""scikit-learn's label encoding of a classifier's first fit, for a plain vector of labels.

scikit-learn's ``MLPClassifier`` fits a ``LabelBinarizer`` on ``y`` and transforms ``y`` with it
on every fit: ``type_of_target`` and ``unique_labels`` run on ``y`` several times over, with
their input checks, and take about half of an Iris fit's fixed cost (docs/performance.md). For
the common case, a 1-D NumPy array of integer or bool labels with scikit-learn's array API
dispatch off, :func:`binarized_labels` gives the same result from one ``np.unique``: a fitted
``LabelBinarizer`` whose attributes equal those its ``fit`` sets (``classes_`` with ``y``'s
dtype, ``y_type_``, ``sparse_input_``), and the bool indicator matrix its ``transform`` gives.
A warm start or ``partial_fit`` keeps the fitted binarizer: :func:`checked_labels` makes
scikit-learn's check of ``y``'s classes against it (same messages) and :func:`transformed`
its ``transform(y).astype(bool)``, when the binarizer is one this module would make
(:func:`plain_binarizer`). Anything else (strings, floats, sparse or 2-D ``y``) goes through
scikit-learn's code. ``tests/sklearn/test_labels.py`` compares both on many label vectors.
"""

from __future__ import annotations

import numpy as np
import sklearn
from sklearn.preprocessing import LabelBinarizer

_KINDS = "iub"  # signed and unsigned integers, bool


def plain_labels(y) -> bool:
    """Whether :func:`binarized_labels` encodes ``y`` as scikit-learn would (see above)."""
    return (type(y) is np.ndarray and y.ndim == 1 and y.dtype.kind in _KINDS and y.size > 0
            and not sklearn.get_config()["array_api_dispatch"])


def binarized_labels(y: np.ndarray) -> tuple[LabelBinarizer, np.ndarray]:
    """``(binarizer, Y)``: ``LabelBinarizer().fit(y)`` and its ``transform(y).astype(bool)``,
    for ``y`` that :func:`plain_labels` accepts."""
    classes, index = np.unique(y, return_inverse=True)
    n, k = len(y), len(classes)
    binarizer = LabelBinarizer()
    # what LabelBinarizer.fit sets: type_of_target says "binary" for at most two labels
    binarizer.y_type_ = "binary" if k <= 2 else "multiclass"
    binarizer.sparse_input_ = False
    binarizer.classes_ = classes
    if k == 1:  # (one class: a column of the negative label)
        return binarizer, np.zeros((n, 1), dtype=bool)
    if k == 2:  # (two classes: one column, true for the second)
        return binarizer, (index == 1).reshape(n, 1)
    Y = np.zeros((n, k), dtype=bool)
    Y[np.arange(n), index] = True
    return binarizer, Y


def plain_binarizer(binarizer, y: np.ndarray) -> bool:
    """Whether :func:`transformed` encodes the plain labels ``y`` with the fitted ``binarizer``
    as its ``transform`` would: a dense binary or multiclass binarizer with labels 0 / 1 whose
    classes have ``y``'s dtype."""
    return (isinstance(binarizer, LabelBinarizer) and binarizer.y_type_ in ("binary", "multiclass")
            and not binarizer.sparse_input_ and not binarizer.sparse_output
            and binarizer.neg_label == 0 and binarizer.pos_label == 1
            and binarizer.classes_.dtype == y.dtype)


def checked_labels(y: np.ndarray, fitted: np.ndarray, warm_start: bool) -> None:
    """scikit-learn's check of a warm start's or ``partial_fit``'s labels ``y`` against the
    ``fitted`` classes (its ``MLPClassifier._validate_input``, same messages)."""
    classes = np.unique(y)
    if warm_start:
        if set(classes) != set(fitted):
            raise ValueError(
                "warm_start can only be used where `y` has the same classes as in the previous "
                f"call to fit. Previously got {fitted}, `y` has {classes}")
    elif len(np.setdiff1d(classes, fitted, assume_unique=True)):
        raise ValueError(f"`y` has classes not in `self.classes_`. `self.classes_` has {fitted}. "
                         f"'y' has {classes}.")


def transformed(binarizer, y: np.ndarray) -> np.ndarray:
    """``binarizer.transform(y).astype(bool)`` for labels ``y`` among its classes (checked by
    :func:`checked_labels`): one column for two classes or one, else one per class."""
    classes = binarizer.classes_
    n, k = len(y), len(classes)
    if k == 1:
        return np.zeros((n, 1), dtype=bool)
    if k == 2:
        return (y == classes[1]).reshape(n, 1)
    Y = np.zeros((n, k), dtype=bool)
    Y[np.arange(n), np.searchsorted(classes, y)] = True
    return Y
