"""A model's data inputs: one array or several (``forward(self, x_num, x_cat)``), checked once
and packed into the one matrix the compiled loop reads.

Each input is an array with one row per sample. Its row shape is what the model receives:
``(N, F)`` reaches ``forward`` as a ``(B, F)`` tensor, ``(N, C, H, W)`` as ``(B, C, H, W)`` and
``(N, H, W)`` as ``(B, H, W)``, as PyTorch gives a model exactly the array's shape. A row is
flattened C-order into ``prod(dims)`` columns of the packed matrix (a zero-copy reshape when the
array is contiguous), and the inputs sit side by side in it, in argument order.

An input of an integer dtype (category or token indices) stays integer end to end: its columns
of the packed matrix hold the bits of int32 (float32 arena) or int64 (float64 arena), written
with ``.view()``, never converted to float; the compiled loader copies them bit for bit. Bool
and float arrays are float inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nnjit.dtypes import integer_dtype


@dataclass(frozen=True)
class InputSpec:
    """How one input was traced: its row shape ``dims`` and whether it holds integers."""

    dims: tuple[int, ...]
    integer: bool = False

    @property
    def cols(self) -> int:
        """Columns of the input in the packed matrix (the row's element count)."""
        return math.prod(self.dims)  # (np.prod costs ~10 us a call; every fit asks)

    def describe(self) -> str:
        """``(None, 3) float`` / ``(None, 1, 28, 28) float`` / ``(None, 2) int``."""
        shape = ", ".join(["None", *map(str, self.dims)])
        return f"({shape}) {'int' if self.integer else 'float'}"


def is_multi(X) -> bool:
    """Whether ``X`` is several inputs: a tuple of arrays, or a list of NumPy arrays (a list of
    numbers or of lists is one array, as ``np.asarray`` reads it)."""
    if isinstance(X, tuple):
        return True
    return isinstance(X, list) and bool(X) and all(isinstance(a, np.ndarray) for a in X)


class Inputs:
    """The checked arrays of one call (``X``, or ``(X_num, X_cat)``), their specs, and their
    packed matrix in an arena dtype (cached per dtype).

    Args:
        X: an array, or a tuple (list) of arrays with the same number of rows.
        where: the argument, named in errors (``"DataLoader: X"``, ``"predict: X"``).
    """

    __slots__ = ("arrays", "specs", "n_rows", "multi", "where", "_packed")

    def __init__(self, X, where: str):
        self.where = where
        self.multi = is_multi(X)
        parts = tuple(X) if self.multi else (X,)
        if not parts:
            raise ValueError(f"{where} is an empty tuple: pass at least one array")
        arrays = []
        for i, a in enumerate(parts):
            arrays.append(check_input(a, self.name(i)))
        rows = [len(a) for a in arrays]
        if len(set(rows)) > 1:
            sizes = ", ".join(f"X[{i}]: {n}" for i, n in enumerate(rows))
            raise ValueError(f"{where}: the inputs have different numbers of rows ({sizes})")
        self.arrays = tuple(arrays)
        self.specs = tuple(InputSpec(tuple(int(d) for d in a.shape[1:]), a.dtype.kind in "iu")
                           for a in arrays)
        self.n_rows = rows[0]
        self._packed: dict = {}

    def name(self, i: int) -> str:
        """``X`` for a single input, ``X[i]`` for input ``i`` of several."""
        return f"{self.where}[{i}]" if self.multi else self.where

    @property
    def n_cols(self) -> int:
        return sum(s.cols for s in self.specs)

    def packed(self, dtype) -> np.ndarray:
        """All inputs as one C-contiguous ``(N, total columns)`` matrix of the arena ``dtype``
        (an integer input's columns hold integer bits); a single float 2-D input of the arena
        dtype is used as is."""
        dtype = np.dtype(dtype)
        out = self._packed.get(dtype)
        if out is None:
            out = self._packed[dtype] = self._pack(dtype)
        return out

    def _pack(self, dtype: np.dtype) -> np.ndarray:
        n = self.n_rows
        if len(self.arrays) == 1:
            return self._column_block(0, dtype)
        out = np.empty((n, self.n_cols), dtype=dtype)
        first = 0
        for i, spec in enumerate(self.specs):
            out[:, first : first + spec.cols] = self._column_block(i, dtype)
            first += spec.cols
        return out

    def _column_block(self, i: int, dtype: np.dtype) -> np.ndarray:
        """Input ``i`` as ``(N, cols)`` of ``dtype``: floats cast (checked finite after the
        cast), integers as the bits of the arena's integer type."""
        a, spec, where = self.arrays[i], self.specs[i], self.name(i)
        flat = a.reshape(len(a), spec.cols)  # (a view when ``a`` is contiguous)
        if not spec.integer:
            return to_arena(flat, dtype, where)
        int_type = integer_dtype(dtype)
        bounds = np.iinfo(int_type)
        low, high = int(flat.min()), int(flat.max())
        if low < bounds.min or high > bounds.max:
            bad = high if high > bounds.max else low
            hint = (" (the float32 arena stores integer inputs as int32); use "
                    "Trainer(dtype=np.float64)" if int_type == np.int32 else "")
            raise ValueError(f"{where} holds the integer {bad}, beyond {int_type}'s range"
                             f"{hint}")
        return np.ascontiguousarray(flat, dtype=int_type).view(dtype)


def check_input(X, where: str) -> np.ndarray:
    """Validate one input array: at least 2-D (samples, features...), non-empty, numeric,
    finite floats."""
    X = np.asarray(X)
    if X.ndim < 2:
        raise ValueError(f"{where} must be 2-D (samples, features) or more (samples, C, H, W), "
                         f"got shape {X.shape}"
                         + ("; a column of indices is X[:, None]" if X.ndim == 1 else ""))
    if X.shape[0] == 0:
        raise ValueError(f"{where} is empty (0 samples)")
    if 0 in X.shape[1:]:
        raise ValueError(f"{where} has no features (shape {X.shape})")
    if X.dtype.kind not in "iufb":
        raise ValueError(f"{where} must be numeric, got dtype {X.dtype}")
    if not all_finite(X):
        row, *col = np.argwhere(~np.isfinite(X))[0]
        at = f"column {col[0]}" if len(col) == 1 else f"index {tuple(int(c) for c in col)}"
        raise ValueError(f"{where} contains NaN or inf (first at row {row}, {at})")
    return X


def spec_mismatch(given: tuple[InputSpec, ...], traced: tuple[InputSpec, ...], where: str,
                  against: str = "the model was traced with") -> str | None:
    """Why inputs of ``given`` specs cannot run on a model traced with ``traced``, or None;
    ``against`` words the traced side (``"train X has"`` for validation data)."""
    if len(given) != len(traced):
        def count(k):
            return "1 input" if k == 1 else f"{k} inputs"

        return (f"{where}: {against} {count(len(traced))} "
                f"({', '.join(s.describe() for s in traced)}), got {count(len(given))}")
    for i, (g, t) in enumerate(zip(given, traced)):
        name = f"input {i}" if len(traced) > 1 else "the input"
        if g.integer != t.integer:
            kind = "integers" if g.integer else "floats"
            return (f"{where}: {name} holds {kind}, {against} {t.describe()} (cast it with "
                    ".astype(...))")
        if g.dims != t.dims:
            if len(g.dims) == len(t.dims) == 1:
                return (f"{where}: {name} has {g.cols} column{'s' if g.cols != 1 else ''}, "
                        f"{against} {t.cols}")
            return f"{where}: {name} has rows of shape {g.dims}, {against} {t.dims}"
    return None


def to_arena(a: np.ndarray, dtype, where: str) -> np.ndarray:
    """``a`` as a C-contiguous array of the arena ``dtype``, checked finite AFTER the cast: a
    float64 value beyond float32's range passes a check made before it and becomes inf."""
    dtype = np.dtype(dtype)
    if a.dtype.kind != "f" or a.dtype.itemsize <= dtype.itemsize:
        return np.ascontiguousarray(a, dtype=dtype)  # (exact or widening: finite stays finite)
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(a, dtype=dtype)
    if not all_finite(out):
        flat = int(np.flatnonzero(~np.isfinite(out.reshape(-1)))[0])
        row, col = divmod(flat, out.shape[1]) if out.ndim == 2 else (flat, 0)
        value = a.reshape(-1)[flat].item()
        raise ValueError(f"{where} has a value beyond {dtype}'s range (first at row {row}, column "
                         f"{col}: {value!r}), which would be inf in the model's {dtype} arena; "
                         f"rescale the data or use Trainer(dtype=np.float64)")
    return out


def all_finite(a: np.ndarray) -> bool:
    """True unless the float array ``a`` holds a NaN or an inf (other kinds always pass).

    Looks at two elements instead of ``np.isfinite(a).all()``: ``argmax``/``argmin`` return the
    first NaN when there is one, else the largest (+inf) and smallest (-inf) element. They are
    plain array methods: a ufunc and its reduction cost ~30 us the first time a fit uses them
    with cold CPU caches (the benchmark's case), more than the work on a small data set.
    """
    if a.dtype.kind != "f" or a.size == 0:
        return True
    if a.dtype.itemsize > 8:  # long double: its finite extremes need not fit a Python float
        return bool(np.isfinite(a).all())
    return math.isfinite(a.item(a.argmax())) and math.isfinite(a.item(a.argmin()))
