"""Classification metrics in NumPy: confusion counts and the classification report.

Label arguments (``y_true``, ``y_pred``) are 1-D sequences of class labels (ints, strings, ...);
a 2-D array of scores with more than one column, shape ``(n, C)`` (logits, probabilities,
one-hot), is turned into class indices by ``argmax`` over the columns, and ``(n, 1)`` is read as
``(n,)``.

Which classes (rows/columns, report lines), in order:

- ``labels`` given: exactly those label values. A value in ``y_true``/``y_pred`` that is not
  one of them is an error (scikit-learn silently drops such rows; nnjit does not).
- else ``target_names`` given and the labels are integers: the classes are ``0..C-1`` with
  ``C = len(target_names)``; a label outside that range is an error.
- else: the sorted union of the values in ``y_true`` and ``y_pred`` (as scikit-learn does).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

REPORT_COLUMNS = ("precision", "recall", "f1-score", "support")


def as_labels(y, name: str) -> np.ndarray:
    """``y`` as a 1-D array of labels (``(n, C)`` scores -> argmax); clear errors otherwise."""
    if y is None:
        raise ValueError(f"{name} is None")
    if isinstance(y, (pd.Series, pd.Index)):
        y = y.to_numpy()
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] > 1:
        if not np.issubdtype(arr.dtype, np.number):
            raise ValueError(f"{name}: a 2-D array is read as class scores and must be numeric, "
                             f"got dtype {arr.dtype}")
        arr = arr.argmax(axis=1)
    elif arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D labels or 2-D (n, C) scores, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            raise ValueError(f"{name} has {int(bad.sum())} NaN/inf labels "
                             f"(first at index {int(np.flatnonzero(bad)[0])})")
        if np.any(arr != np.round(arr)):
            raise ValueError(f"{name}: float labels must be whole numbers (class indices); "
                             f"pass class scores as a 2-D (n, C) array")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    return arr


def pair(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    y_true, y_pred = as_labels(y_true, "y_true"), as_labels(y_pred, "y_pred")
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true and y_pred have different lengths: {len(y_true)} != "
                         f"{len(y_pred)}")
    return y_true, y_pred


def resolve_labels(y_true: np.ndarray, y_pred: np.ndarray, labels=None,
                   target_names=None) -> np.ndarray:
    """The class labels, in matrix order (see the module docstring); validates the data."""
    if labels is not None:
        labels = np.asarray(list(labels))
        if labels.ndim != 1 or labels.size == 0:
            raise ValueError(f"labels must be a non-empty 1-D sequence, got {labels!r}")
        if len(pd.unique(labels)) != len(labels):
            raise ValueError(f"labels repeat: {labels.tolist()}")
        for name, y in (("y_true", y_true), ("y_pred", y_pred)):
            outside = ~np.isin(y, labels)
            if outside.any():
                raise ValueError(f"{name} has labels out of range (not in labels="
                                 f"{labels.tolist()}): {pd.unique(y[outside])[:10].tolist()}")
    elif target_names is not None and all(y.dtype.kind in "iu" for y in (y_true, y_pred)):
        n = len(target_names)
        for name, y in (("y_true", y_true), ("y_pred", y_pred)):
            if y.min() < 0 or y.max() >= n:
                raise ValueError(f"{name} has labels out of range: class indices must be in "
                                 f"0..{n - 1} for {n} target_names, got {y.min()}..{y.max()}")
        labels = np.arange(n)
    else:
        try:
            labels = np.unique(np.concatenate([y_true, y_pred]))
        except TypeError as exc:
            raise ValueError("y_true and y_pred mix label types that cannot be sorted; pass "
                             "labels=[...]") from exc
    if target_names is not None and len(target_names) != len(labels):
        raise ValueError(f"target_names has {len(target_names)} names for {len(labels)} classes "
                         f"{labels.tolist()}")
    return labels


def confusion_counts(y_true, y_pred, labels=None, target_names=None):
    """Confusion matrix counts ``C[i, j]`` = rows of true class ``i`` predicted as ``j``.

    Returns ``(matrix int64 (K, K), labels (K,))``; equal to
    ``sklearn.metrics.confusion_matrix(y_true, y_pred, labels=labels)``.
    """
    y_true, y_pred = pair(y_true, y_pred)
    labels = resolve_labels(y_true, y_pred, labels, target_names)
    index = pd.Index(labels.tolist(), dtype=object)
    t = index.get_indexer(y_true.tolist())
    p = index.get_indexer(y_pred.tolist())
    k = len(labels)
    matrix = np.bincount(t * k + p, minlength=k * k).reshape(k, k).astype(np.int64)
    return matrix, labels


def normalize_counts(matrix: np.ndarray, normalize) -> np.ndarray:
    """Rates from counts: ``'true'`` (rows sum to 1), ``'pred'`` (columns), ``'all'``, ``None``.

    A row/column with no samples gives zeros (as scikit-learn).
    """
    if normalize is None:
        return matrix.astype(np.float64)
    if normalize == "true":
        total = matrix.sum(axis=1, keepdims=True)
    elif normalize == "pred":
        total = matrix.sum(axis=0, keepdims=True)
    elif normalize == "all":
        total = np.full((1, 1), matrix.sum())
    else:
        raise ValueError(f"normalize must be None, 'true', 'pred' or 'all', got {normalize!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = matrix / total
    return np.nan_to_num(rates, nan=0.0, posinf=0.0, neginf=0.0)


def classification_report(y_true, y_pred, target_names=None, labels=None) -> pd.DataFrame:
    """Precision, recall, F1 and support per class, then accuracy, macro and weighted averages.

    A DataFrame with index ``[*classes, 'accuracy', 'macro avg', 'weighted avg']`` (classes
    named by ``target_names`` or ``str(label)``, as the keys of scikit-learn's
    ``classification_report(output_dict=True)``) and columns ``precision, recall, f1-score,
    support``. Values equal scikit-learn's (undefined ratios are 0, its ``zero_division`` default).
    The ``accuracy`` row holds the accuracy in ``f1-score``, the total in ``support`` and NaN
    elsewhere (the layout of scikit-learn's text report).
    """
    matrix, labels = confusion_counts(y_true, y_pred, labels, target_names)
    tp = np.diag(matrix).astype(np.float64)
    support = matrix.sum(axis=1).astype(np.float64)
    predicted = matrix.sum(axis=0).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(predicted > 0, tp / predicted, 0.0)
        recall = np.where(support > 0, tp / support, 0.0)
        denom = support + predicted
        f1 = np.where(denom > 0, 2.0 * tp / denom, 0.0)
    total = support.sum()
    names = ([str(n) for n in target_names] if target_names is not None
             else [str(lab) for lab in labels.tolist()])
    rows = {name: (precision[i], recall[i], f1[i], int(support[i]))
            for i, name in enumerate(names)}
    if len(rows) != len(names):
        raise ValueError(f"class names repeat: {names}")
    rows["accuracy"] = (np.nan, np.nan, tp.sum() / total, int(total))
    rows["macro avg"] = (precision.mean(), recall.mean(), f1.mean(), int(total))
    rows["weighted avg"] = (*(float(np.average(v, weights=support))
                              for v in (precision, recall, f1)), int(total))
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(REPORT_COLUMNS))
    frame["support"] = frame["support"].astype(np.int64)
    return frame
