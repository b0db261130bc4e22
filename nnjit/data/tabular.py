"""Tabular data from a pandas DataFrame: split, one-hot encode, standardise (pure pandas/NumPy).

``TabularDataset.from_dataframe(df, features, target, task=..., val=0.15, test=0.15, seed=0)``
splits the rows into train / validation / test parts (stratified by class for classification)
and then learns every statistic from the **training part only**:

- categorical feature columns (dtype ``object``, ``str``/``string``, ``category``, ``bool`` or
  nullable ``boolean``) are one-hot encoded with one column per category seen in the training
  rows, named ``"<column>=<value>"``. Categories are sorted when their values can be sorted
  (a ``category`` dtype keeps its declared order); otherwise they keep the order of first
  appearance. **A category that never occurs in the training rows is encoded as all zeros** in
  that column's one-hot block in the validation and test parts. In new rows given to
  ``transform`` it is an error naming the column and the value (``unseen="zeros"``: all zeros).
- numeric feature columns are standardised, ``(x - mean) / std``, with the training part's mean
  and population standard deviation (``ddof=0``, as scikit-learn's ``StandardScaler``). A
  constant column (std 0) is divided by 1 instead. Statistics are computed in float64.

Targets:

- ``task='classification'``: one target column; its distinct values (from the whole frame, so
  every split maps the same way) are sorted when possible and mapped to ``0..C-1``;
  ``classes[k]`` is the original label of class ``k``. ``y_*`` are int64 arrays of shape ``(n,)``.
  The split is stratified: each class is spread over the parts in proportion, and every class
  keeps at least one training row.
- ``task='regression'``: one target column (``y_*`` of shape ``(n, 1)``) or a list of numeric
  target columns (shape ``(n, K)``), float32, **always 2-D** and not rescaled.

Missing values (``NaN``/``None``/``NA``) in a feature or target column are an error naming each
column and its count: nothing is imputed silently. Infinite numbers are an error too. All ``X_*``
are C-contiguous float32 arrays of shape ``(n, len(feature_names))``. With ``val=0`` (or
``test=0``) that part is an empty array with 0 rows.

The encoding alone (column order, means and scales, categories, classes) is a
:class:`~nnjit.data.tabular_encoding.TabularEncoding` (``ds.encoding``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

from nnjit.checks import Int, Real
from nnjit.data.split import Split, split_rows
from nnjit.data.tabular_encoding import (
    TASKS,
    ColumnEncoding,
    TabularEncoding,
    check_columns,
    check_missing,
    column_kind,
    encode_columns,
    learn_encoding,
    numeric_values,
    ordered_unique,
)


@dataclasses.dataclass(frozen=True, eq=False)
class TabularDataset(Split):
    """Encoded train / validation / test arrays (a :class:`~nnjit.data.split.Split`) and the
    encoding that made them.

    Build it with ``TabularDataset.from_dataframe``; see the module docstring for the rules.

    Attributes:
        X_train, X_val, X_test: float32 ``(n, len(feature_names))``.
        y_train, y_val, y_test: int64 ``(n,)`` class indices (classification) or float32
            ``(n, K)`` targets (regression).
        feature_names: output column names after one-hot encoding, in ``X`` column order.
        classes: original label of each class index (classification); ``None`` for regression.
        task: ``'classification'`` or ``'regression'``.
        features: the input feature column names, in order.
        target: the target column name (or tuple of names for multi-target regression).
        encodings: one ``ColumnEncoding`` per input feature column.
        train_rows, val_rows, test_rows: positions (``df.iloc``) of each part's rows in the
            original frame, ascending.
    """

    feature_names: tuple[str, ...]
    classes: tuple | None
    task: str
    features: tuple
    target: object
    encodings: tuple[ColumnEncoding, ...]
    train_rows: np.ndarray
    val_rows: np.ndarray
    test_rows: np.ndarray

    @classmethod
    def from_dataframe(cls, df: pd.DataFrame, features: Sequence | None, target,
                       task: str = "classification", val: float = 0.15, test: float = 0.15,
                       seed: int = 0) -> "TabularDataset":
        """Split ``df`` and encode it with statistics from the training part only.

        Args:
            df: the data, one row per sample.
            features: input column names (``None``: every column except the target(s)).
            target: the target column name; for regression also a list of names.
            task: ``'classification'`` (stratified split, labels mapped to ``0..C-1``) or
                ``'regression'``.
            val, test: fractions of the rows for the validation and test parts
                (``round(fraction * n)`` rows each), ``>= 0`` with ``val + test < 1``.
            seed: seed of the split (NumPy ``default_rng``); same seed, same split.

        Raises:
            ValueError: missing columns (all listed), missing or infinite values (columns and
                counts listed), unsupported dtypes, bad fractions, an empty frame.
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"TabularDataset: df must be a pandas DataFrame, got "
                            f"{type(df).__name__}")
        if task not in TASKS:
            raise ValueError(f"TabularDataset: task must be one of {TASKS}, got {task!r}")
        val, test = _fraction(val, "val"), _fraction(test, "test")
        if val + test >= 1.0:
            raise ValueError(f"TabularDataset: val + test must be < 1 (no rows left to train on), "
                             f"got val={val} + test={test}")
        seed = Int(min=0).check("TabularDataset: seed", seed)

        targets = _target_names(target, task)
        features = _feature_names(df, features, targets)
        check_columns(df, features, targets)
        if len(df) == 0:
            raise ValueError("TabularDataset: the DataFrame has no rows")
        check_missing(df, list(features) + list(targets))
        kinds = {name: column_kind(df[name], name) for name in features}

        classes = None
        if task == "classification":
            classes, y_all = _encode_classes(df[targets[0]])
            parts = split_rows(len(df), val, test, seed, y_all, len(classes), "TabularDataset")
        else:
            y_all = np.stack([numeric_values(df[name], name, "target") for name in targets],
                             axis=1).astype(np.float32)
            parts = split_rows(len(df), val, test, seed, where="TabularDataset")
        train_rows, val_rows, test_rows = parts

        train_df = df.iloc[train_rows]
        encodings = tuple(learn_encoding(train_df[name], name, kinds[name]) for name in features)
        feature_names = tuple(n for enc in encodings for n in enc.output_names)
        X_all = encode_columns(df, encodings, len(feature_names))
        return cls(
            X_train=X_all[train_rows], y_train=y_all[train_rows],
            X_val=X_all[val_rows], y_val=y_all[val_rows],
            X_test=X_all[test_rows], y_test=y_all[test_rows],
            feature_names=feature_names, classes=classes, task=task, features=features,
            target=targets if _is_list(target) else target,
            encodings=encodings, train_rows=train_rows, val_rows=val_rows, test_rows=test_rows,
        )

    # ------------------------------------------------------------------------------ new rows
    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def n_outputs(self) -> int:
        """Output units a model needs: number of classes, or number of regression targets."""
        if self.task == "classification":
            return len(self.classes)
        return int(self.y_train.shape[1])

    @property
    def encoding(self) -> TabularEncoding:
        """The learned encoding alone (saved with a run; see :class:`TabularEncoding`)."""
        return TabularEncoding(columns=self.encodings, task=self.task, target=self.target,
                               classes=self.classes)

    def transform(self, df: pd.DataFrame, unseen: str = "error") -> np.ndarray:
        """Encode new rows exactly as the training data was: float32 ``(len(df), n_features)``
        (:meth:`TabularEncoding.transform`: every input column needed, others ignored; an
        unseen category is an error naming the column and value, or zeros with
        ``unseen="zeros"``)."""
        return self.encoding.transform(df, unseen)

    def transform_target(self, values) -> np.ndarray:
        """Encode targets as ``y_*`` are: labels -> int64 class indices, or float32 ``(n, K)``.

        ``values`` is a DataFrame holding the target column(s), a Series, or an array. A label
        that is not one of ``classes`` is an error.
        """
        targets = self.target if isinstance(self.target, tuple) else (self.target,)
        if isinstance(values, pd.DataFrame):
            check_columns(values, (), targets, where="transform_target",
                          wanted_by="the target the model was trained on")
            frame = values[list(targets)]
        else:
            arr = np.asarray(values, dtype=object if self.task == "classification" else None)
            frame = pd.DataFrame(arr.reshape(len(arr), -1), columns=list(targets))
        check_missing(frame, list(targets), where="transform_target")
        if self.task == "regression":
            return np.stack([numeric_values(frame[t], t, "target") for t in targets],
                            axis=1).astype(np.float32)
        labels = frame[targets[0]].astype(object).to_numpy()
        codes = pd.Index(list(self.classes), dtype=object).get_indexer(labels)
        if (codes < 0).any():
            unknown = pd.unique(labels[codes < 0])[:10]
            raise ValueError(f"transform_target: labels not among the classes {list(self.classes)}"
                             f": {list(unknown)}")
        return codes.astype(np.int64)

    def decode_labels(self, y) -> np.ndarray:
        """Class indices (or ``(n, C)`` scores: argmax) back to the original labels."""
        return self.encoding.decode_labels(y)

    def __repr__(self) -> str:
        extra = f", classes={len(self.classes)}" if self.classes is not None else ""
        return (f"TabularDataset(task={self.task!r}, train={len(self.X_train)}, "
                f"val={len(self.X_val)}, test={len(self.X_test)}, "
                f"features={len(self.features)} -> {self.n_features}{extra})")


# ---------------------------------------------------------------------------------- checks


def _is_list(value) -> bool:
    return isinstance(value, (list, tuple))


def _fraction(value, name: str) -> float:
    return Real(min=0, lt=1, says="a fraction in [0, 1)").check(f"TabularDataset: {name}", value)


def _target_names(target, task: str) -> tuple:
    if _is_list(target):
        names = tuple(target)
        if not names:
            raise ValueError("TabularDataset: target is an empty list")
        if task == "classification" and len(names) != 1:
            raise ValueError(f"TabularDataset: classification takes one target column, got "
                             f"{list(names)}")
        if len(set(names)) != len(names):
            raise ValueError(f"TabularDataset: target names repeat: {list(names)}")
        return names
    return (target,)


def _feature_names(df: pd.DataFrame, features, targets: tuple) -> tuple:
    if features is None:
        names = tuple(c for c in df.columns if c not in targets)
        if not names:
            raise ValueError("TabularDataset: no feature columns (every column is a target)")
        return names
    if isinstance(features, str) or not isinstance(features, Sequence):
        raise TypeError(f"TabularDataset: features must be a list of column names, got "
                        f"{features!r}")
    names = tuple(features)
    if not names:
        raise ValueError("TabularDataset: features is empty")
    repeated = sorted({str(n) for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"TabularDataset: feature names repeat: {repeated}")
    both = [n for n in names if n in targets]
    if both:
        raise ValueError(f"TabularDataset: columns both feature and target: {both}")
    return names


# -------------------------------------------------------------------------------- encoding


def _encode_classes(column: pd.Series) -> tuple[tuple, np.ndarray]:
    classes = ordered_unique(column)
    codes = pd.Index(classes, dtype=object).get_indexer(column.astype(object).to_numpy())
    return tuple(classes), codes.astype(np.int64)
