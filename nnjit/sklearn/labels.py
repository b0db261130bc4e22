"""scikit-learn's label encoding of a classifier's first fit, for a plain vector of labels.

scikit-learn's ``MLPClassifier`` fits a ``LabelBinarizer`` on ``y`` and transforms ``y`` with it
on every fit: ``type_of_target`` and ``unique_labels`` run on ``y`` several times over, with
their input checks, and take about half of an Iris fit's fixed cost (docs/performance.md). For
the common case, a 1-D NumPy array of integer or bool labels with scikit-learn's array API
dispatch off, :func:`binarized_labels` gives the same result from one ``np.unique``: a fitted
``LabelBinarizer`` whose attributes equal those its ``fit`` sets (``classes_`` with ``y``'s
dtype, ``y_type_``, ``sparse_input_``), and the bool indicator matrix its ``transform`` gives.
Anything else (strings, floats, sparse or 2-D ``y``, a warm start or ``partial_fit`` that
checks the labels against the fitted classes) goes through scikit-learn's code.
``tests/sklearn/test_labels.py`` compares both on many label vectors.
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
