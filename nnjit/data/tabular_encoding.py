"""The encoding of a table's columns, learnt from training rows: one-hot categories, standardised
numbers, class labels (:mod:`nnjit.data.tabular` learns it from a DataFrame).

The encoding alone (column order, means and scales, categories, classes) is a
:class:`TabularEncoding` (``ds.encoding``): ``state()`` is a small JSON-able dict,
``TabularEncoding.from_state`` checks one read back from a file (untrusted: types, lengths,
finite numbers), and ``transform`` applies it to new rows. A run trained on a CSV saves it as
``encoding.json`` and in its checkpoints, so ``nnjit predict`` can score new CSV rows.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import reprlib

import numpy as np
import pandas as pd

from nnjit.checks import Real
from nnjit.io.regular import open_regular

TASKS = ("classification", "regression")
#: ``TabularEncoding.state()["format"]``; ``version`` is :data:`ENCODING_VERSION`.
ENCODING_FORMAT = "nnjit.tabular_encoding"
ENCODING_VERSION = 1
#: Largest ``encoding.json`` read back (an encoding of thousands of categories is a few MB).
MAX_ENCODING_BYTES = 64 * 2**20


@dataclasses.dataclass(frozen=True, eq=False)
class ColumnEncoding:
    """How one input column becomes feature columns (learned from the training part).

    ``kind`` is ``'numeric'`` (one output column: ``(x - mean) / scale``) or ``'categorical'``
    (one output column per entry of ``categories``; an unseen value gives all zeros).
    """

    name: object
    kind: str
    mean: float = 0.0
    scale: float = 1.0
    categories: tuple = ()

    @property
    def output_names(self) -> tuple[str, ...]:
        if self.kind == "numeric":
            return (str(self.name),)
        return tuple(f"{self.name}={value}" for value in self.categories)

    def encode(self, column: pd.Series, out: np.ndarray, unseen: str = "zeros") -> None:
        """Write the encoded ``column`` into ``out`` (shape ``(n, len(output_names))``); a
        category not in ``categories`` gives zeros, or a ValueError with ``unseen="error"``."""
        if self.kind == "numeric":
            values = numeric_values(column, self.name)
            out[:, 0] = (values - self.mean) / self.scale
            return
        values = column.astype(object).to_numpy()
        codes = pd.Index(list(self.categories), dtype=object).get_indexer(values)
        seen = codes >= 0
        if unseen == "error" and not seen.all():
            row = int(np.flatnonzero(~seen)[0])
            others = len(pd.unique(values[~seen])) - 1
            raise ValueError(
                f"column {_excerpt(self.name)} has the category {_excerpt(values[row])} (row {row}"
                f"{f', and {others} other unseen values' if others else ''}), which the "
                f"training rows did not have; known: {_shown(self.categories)}")
        out[np.flatnonzero(seen), codes[seen]] = 1.0


@dataclasses.dataclass(frozen=True, eq=False)
class TabularEncoding:
    """How rows of a table become model inputs, and class indices become labels: what a
    :class:`TabularDataset` learned from its training part.

    Attributes:
        columns: one :class:`ColumnEncoding` per input column, in ``X`` column order.
        task: ``'classification'`` or ``'regression'``.
        target: the target column name (a tuple of names for multi-target regression).
        classes: the original label of each class index; ``None`` for regression.

    ``state()`` / ``from_state()`` convert it to and from a small JSON-able dict (what
    ``encoding.json`` in a run folder holds); ``save`` / ``load`` write and read that file.
    """

    columns: tuple[ColumnEncoding, ...]
    task: str
    target: object
    classes: tuple | None

    @property
    def features(self) -> tuple:
        """The input column names, in order."""
        return tuple(c.name for c in self.columns)

    @property
    def feature_names(self) -> tuple[str, ...]:
        """Output column names after one-hot encoding, in ``X`` column order."""
        return tuple(n for c in self.columns for n in c.output_names)

    def transform(self, df: pd.DataFrame, unseen: str = "error") -> np.ndarray:
        """Encode new rows as the training rows were: float32 ``(len(df), len(feature_names))``.

        ``df`` must hold every input column, in any order; other columns (the target, an id...)
        are ignored. A missing value, a numeric column holding text, or (with ``unseen="error"``)
        a category the training rows did not have is a ValueError naming the column (and the
        value); ``unseen="zeros"`` encodes such a category as all zeros instead.
        """
        if unseen not in ("error", "zeros"):
            raise ValueError(f"transform: unseen must be 'error' or 'zeros', got {unseen!r}")
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"transform: df must be a pandas DataFrame, got {type(df).__name__}")
        check_columns(df, self.features, (), where="transform",
                      wanted_by="the model was trained on them")
        check_missing(df, list(self.features), where="transform")
        for enc in self.columns:
            if enc.kind == "numeric":
                column_kind(df[enc.name], enc.name, expect="numeric", where="transform")
        try:
            return encode_columns(df, self.columns, len(self.feature_names), unseen)
        except ValueError as e:
            raise ValueError(f"transform: {e}") from None

    def decode_labels(self, y) -> np.ndarray:
        """Class indices (or ``(n, C)`` scores: argmax) back to the original labels."""
        if self.task != "classification":
            raise ValueError("decode_labels: only for task='classification'")
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] > 1:
            y = y.argmax(axis=1)
        y = y.reshape(-1).astype(np.int64)
        if y.size and (y.min() < 0 or y.max() >= len(self.classes)):
            raise ValueError(f"decode_labels: class indices must be in 0..{len(self.classes) - 1}"
                             f", got {y.min()}..{y.max()}")
        return np.asarray(self.classes, dtype=object)[y]

    # ------------------------------------------------------------------------- serialising
    def state(self) -> dict:
        """A JSON-able dict (names, numbers, category values: strings, ints, finite floats,
        booleans); ValueError naming the column when a value cannot be stored in JSON."""
        columns = []
        for c in self.columns:
            _check_scalar(c.name, f"column name {c.name!r}", names=True)
            if c.kind == "numeric":
                columns.append({"name": c.name, "kind": c.kind, "mean": float(c.mean),
                                "scale": float(c.scale)})
            else:
                for value in c.categories:
                    _check_scalar(value, f"column {c.name!r}: category {value!r}")
                columns.append({"name": c.name, "kind": c.kind,
                                "categories": list(c.categories)})
        classes = None
        if self.classes is not None:
            for value in self.classes:
                _check_scalar(value, f"class label {value!r}")
            classes = list(self.classes)
        target = list(self.target) if isinstance(self.target, tuple) else self.target
        return {"format": ENCODING_FORMAT, "version": ENCODING_VERSION, "task": self.task,
                "target": target, "classes": classes, "columns": columns}

    @classmethod
    def from_state(cls, state, where: str = "encoding") -> "TabularEncoding":
        """Rebuild an encoding from :meth:`state`'s dict, checking every field (it may come
        from an untrusted file); ValueError naming ``where`` and the field at fault."""
        def fail(message):
            return ValueError(f"{where}: {message}")

        _expect_keys(state, {"format", "version", "task", "target", "classes", "columns"}, where)
        if state["format"] != ENCODING_FORMAT or state["version"] != ENCODING_VERSION:
            raise fail(f"not an nnjit tabular encoding of version {ENCODING_VERSION} (format "
                       f"{state['format']!r}, version {state['version']!r})")
        task = state["task"]
        if task not in TASKS:
            raise fail(f"task must be one of {TASKS}, got {task!r}")
        target = state["target"]
        if isinstance(target, list):
            if task != "regression" or not target:
                raise fail("a list target needs task 'regression' and at least one name")
            for name in target:
                _check_scalar(name, "target name", where, names=True)
            target = tuple(target)
        else:
            _check_scalar(target, "target name", where, names=True)
        classes = state["classes"]
        if task == "classification":
            if not isinstance(classes, list) or not classes:
                raise fail("classes must be a non-empty list for classification")
            for value in classes:
                _check_scalar(value, "class label", where)
            _check_unique(classes, "classes", where)
            classes = tuple(classes)
        elif classes is not None:
            raise fail("classes must be null for regression")
        columns = state["columns"]
        if not isinstance(columns, list) or not columns:
            raise fail("columns must be a non-empty list")
        encodings = []
        for i, col in enumerate(columns):
            at = f"{where}: columns[{i}]"
            if not isinstance(col, dict) or col.get("kind") not in ("numeric", "categorical"):
                raise ValueError(f"{at}: expected an object with kind 'numeric' or "
                                 "'categorical'")
            if col["kind"] == "numeric":
                _expect_keys(col, {"name", "kind", "mean", "scale"}, at)
                mean, scale = (_finite(col[k], f"{at}.{k}") for k in ("mean", "scale"))
                if scale <= 0.0:
                    raise ValueError(f"{at}.scale must be > 0, got {scale}")
                _check_scalar(col["name"], "name", at, names=True)
                encodings.append(ColumnEncoding(col["name"], "numeric", mean, scale))
            else:
                _expect_keys(col, {"name", "kind", "categories"}, at)
                _check_scalar(col["name"], "name", at, names=True)
                categories = col["categories"]
                if not isinstance(categories, list) or not categories:
                    raise ValueError(f"{at}.categories must be a non-empty list")
                for value in categories:
                    _check_scalar(value, "category", at)
                _check_unique(categories, f"columns[{i}].categories", where)
                encodings.append(ColumnEncoding(col["name"], "categorical",
                                                categories=tuple(categories)))
        _check_unique([c.name for c in encodings], "column names", where)
        targets = target if isinstance(target, tuple) else (target,)
        both = [t for t in targets if t in {c.name for c in encodings}]
        if both:
            raise fail(f"columns both feature and target: {both}")
        return cls(columns=tuple(encodings), task=task, target=target, classes=classes)

    def save(self, path) -> None:
        """Write :meth:`state` as JSON to ``path`` atomically."""
        from nnjit.io.atomic import atomic_write_text

        atomic_write_text(path, json.dumps(self.state(), indent=1, allow_nan=False) + "\n")

    @classmethod
    def load(cls, path) -> "TabularEncoding":
        """Read a file written by :meth:`save` (checked by :meth:`from_state`)."""
        where = os.fspath(path)
        if os.path.getsize(path) > MAX_ENCODING_BYTES:
            raise ValueError(f"{where}: larger than {MAX_ENCODING_BYTES} bytes; not an encoding")
        try:
            with open_regular(path, "r", encoding="utf-8") as fh:  # (never a FIFO)
                state = json.load(fh, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, NaN, nested too deep
            raise ValueError(f"{where}: not a JSON encoding file ({str(e)[:200]})") from None
        except OSError as e:
            if e.errno != errno.EINVAL:  # (missing, unreadable: as open() says)
                raise
            raise ValueError(f"{where}: {e.strerror}") from None
        return cls.from_state(state, where)


def _shown(values, limit: int = 20) -> str:
    values = list(values)
    return (", ".join(_excerpt(v, 40) for v in values[:limit])
            + (", ..." if len(values) > limit else ""))


def _check_scalar(value, what: str, where: str | None = None, names: bool = False) -> None:
    """ValueError unless ``value`` is a string, an int (names: string or int only), a finite
    float or a bool: what JSON stores and reads back as the same Python value."""
    allowed = (str, int) if names else (str, int, float)
    ok = (isinstance(value, allowed) and not (names and isinstance(value, bool))) and not (
        isinstance(value, float) and not math.isfinite(value))
    if not ok:
        kind = "a string or an int" if names else "a string, an int, a finite float or a bool"
        prefix = f"{where}: " if where else "cannot store the encoding: "
        raise ValueError(f"{prefix}{what} must be {kind}, got {type(value).__name__} "
                         f"{value!r}"[:300])


def _excerpt(value, limit: int = 200) -> str:
    """``repr(value)`` in at most ~``limit`` characters (a file's content may be any size; the
    same rule as :func:`nnjit.experiment.excerpt.excerpt`, which sits in a layer above)."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    bounded = reprlib.Repr()
    bounded.maxstring = bounded.maxother = limit
    text = bounded.repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


def _check_unique(values: list, what: str, where: str) -> None:
    keys = [(type(v).__name__ if isinstance(v, bool) else "", v) for v in values]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{where}: {what} repeat")
    # compared as pandas indexes them (True == 1 == 1.0 there): transform looks values up so
    if not pd.Index(list(values), dtype=object).is_unique:
        raise ValueError(f"{where}: {what} hold values pandas treats as one key (e.g. true and 1, "
                         f"or 1 and 1.0): {_excerpt(list(values))}")


def _expect_keys(value, keys: set, where: str) -> None:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(value).__name__}")
    if set(value) != keys:
        missing, extra = sorted(keys - set(value)), sorted(map(str, set(value) - keys))
        raise ValueError(f"{where}: expected the fields {sorted(keys)}"
                         f"{f'; missing {missing}' if missing else ''}"
                         f"{f'; unexpected {extra}' if extra else ''}")


def _finite(value, where: str) -> float:
    return Real(says="a finite number").check(where, value)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a finite number")


def check_columns(df: pd.DataFrame, features, targets, where: str = "TabularDataset",
                  wanted_by: str = "named as features or target") -> None:
    """Refuse a DataFrame with repeated column names or without one of ``features``/``targets``
    (the message says which are missing and why they are wanted: ``wanted_by``)."""
    if not df.columns.is_unique:
        dup = sorted({str(c) for c in df.columns[df.columns.duplicated()]})
        raise ValueError(f"{where}: the DataFrame has duplicate column names: {dup}")
    missing = [n for n in list(features) + list(targets) if n not in df.columns]
    if missing:
        available = [str(c) for c in df.columns]
        shown = available[:30] + (["..."] if len(available) > 30 else [])
        raise ValueError(f"{where}: missing columns {missing} ({wanted_by}); the DataFrame has "
                         f"{shown}")


def check_missing(df: pd.DataFrame, columns: list, where: str = "TabularDataset") -> None:
    counts = df[columns].isna().sum()
    bad = [(name, int(n)) for name, n in zip(columns, counts.to_numpy()) if n]
    if bad:
        listed = ", ".join(f"{name!s} ({n} of {len(df)})" for name, n in bad)
        raise ValueError(f"{where}: missing values (NaN/None) in columns: {listed}. nnjit does "
                         f"not impute: drop or fill them first (df.dropna(subset=...), "
                         f"df.fillna(...))")


def column_kind(column: pd.Series, name, expect: str | None = None,
                 where: str = "TabularDataset") -> str:
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_bool_dtype(dtype) or (
            pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)):
        kind = "categorical"
    elif pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype):
        kind = "numeric"
    else:
        raise ValueError(f"{where}: column {name!r} has unsupported dtype {dtype} (numbers, "
                         f"strings, categories and booleans are supported)")
    if expect is not None and kind != expect:
        raise ValueError(f"{where}: column {name!r} was {expect} in training, got dtype {dtype}")
    return kind


def numeric_values(column: pd.Series, name, role: str = "feature") -> np.ndarray:
    try:
        values = column.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{role} column {name!r} must be numeric, got dtype "
                         f"{column.dtype}") from exc
    bad = ~np.isfinite(values)
    if bad.any():
        raise ValueError(f"{role} column {name!r} has {int(bad.sum())} infinite values "
                         f"(first at row {int(np.flatnonzero(bad)[0])})")
    return values


def ordered_unique(column: pd.Series) -> list:
    """Distinct values: a category dtype's order, else sorted, else first appearance."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        present = set(column.unique().tolist())
        return [c for c in column.dtype.categories.tolist() if c in present]
    values = [v.item() if isinstance(v, np.generic) else v
              for v in pd.unique(column.astype(object).to_numpy())]
    try:
        return sorted(values)
    except TypeError:
        return values


def learn_encoding(column: pd.Series, name, kind: str) -> ColumnEncoding:
    if kind == "categorical":
        return ColumnEncoding(name=name, kind=kind, categories=tuple(ordered_unique(column)))
    values = numeric_values(column, name)
    mean = float(values.mean())
    std = float(values.std())
    return ColumnEncoding(name=name, kind=kind, mean=mean, scale=std if std > 0.0 else 1.0)


def encode_columns(df: pd.DataFrame, encodings: tuple[ColumnEncoding, ...], width: int,
            unseen: str = "zeros") -> np.ndarray:
    X = np.zeros((len(df), width), dtype=np.float32)
    start = 0
    for enc in encodings:
        stop = start + len(enc.output_names)
        block = np.zeros((len(df), stop - start), dtype=np.float64)
        enc.encode(df[enc.name], block, unseen)
        with np.errstate(over="ignore"):  # (checked just below, naming the cell)
            X[:, start:stop] = block
        bad = ~np.isfinite(X[:, start:stop])
        if bad.any():  # finite as float64, beyond float32 once scaled and cast
            row = int(np.flatnonzero(bad.any(axis=1))[0])
            raise ValueError(f"column {_excerpt(enc.name)} has the value "
                             f"{_excerpt(df[enc.name].iloc[row])} at row {row}, beyond float32 "
                             f"once scaled (the model's inputs are float32)")
        start = stop
    return X
