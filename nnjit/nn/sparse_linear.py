"""``SparseLinear``: a first layer whose input rows are rows of a sparse (CSR) matrix."""

from __future__ import annotations

import math

import numpy as np

from nnjit.checks import Int
from nnjit.dtypes import DEFAULT_DTYPE
from nnjit.nn.module import Module
from nnjit.nn.parameter import Parameter
from nnjit.ops.sparse import sparse_linear
from nnjit.random import generator as default_generator
from nnjit.tape.tape import Tensor

_WIDTH = Int(min=1, says="a positive int")


class SparseLinear(Module):
    r"""Fully connected layer on sparse input: :math:`y = x W + b`, x a row of a CSR matrix.

    The model's input is an integer column of row numbers ``(B, 1)`` of the CSR matrix the
    program carries (:mod:`nnjit.graph.csr_rows`); the product reads only each row's non-zeros,
    so a wide sparse input (TF-IDF features) is never densified. nnjit.sklearn's MLP estimators
    use it for a sparse ``X``.

    Args:
        in_features: columns of the sparse matrix.
        out_features: size of each output row.
        bias: learn an additive bias (default True).
        generator: a ``numpy.random.Generator`` for the initial values (Glorot uniform, zero
            bias; default :func:`nnjit.random.generator`); ``init_values=False`` skips them.
        init_values: draw initial values (default True); False leaves zeros, for a caller that
            writes the weights itself (no draw of a large random matrix).

    Shapes:
        input ``(B, 1)`` integer, output ``(B, out_features)``; ``weight`` is
        ``(in_features, out_features)`` (scikit-learn's ``coefs_[0]`` layout, the transpose of
        :class:`~nnjit.nn.Linear`'s: each non-zero reads one contiguous row) and ``bias``
        ``(out_features,)``.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 generator: np.random.Generator | None = None, init_values: bool = True):
        super().__init__()
        for arg, value in (("in_features", in_features), ("out_features", out_features)):
            _WIDTH.check(f"SparseLinear: {arg}", value)
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        shape = (self.in_features, self.out_features)
        if init_values:
            rng = default_generator() if generator is None else generator
            limit = math.sqrt(6.0 / (in_features + out_features))
            w = rng.uniform(-limit, limit, shape).astype(DEFAULT_DTYPE)
        else:
            w = np.zeros(shape, dtype=DEFAULT_DTYPE)  # (pages untouched until written)
        self.weight = Parameter(w, copy=False)
        self.bias = Parameter(np.zeros(out_features, dtype=DEFAULT_DTYPE)) if bias else None

    def forward(self, rows: Tensor) -> Tensor:
        params = self._parameters  # (self.weight would go through Module.__getattr__)
        tape = rows.tape
        path = self._path
        w = tape.parameter(params["weight"], f"{path}.weight" if path else "weight")
        b = params.get("bias")
        if b is not None:
            b = tape.parameter(b, f"{path}.bias" if path else "bias")
        return sparse_linear(rows, w, b)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")
