"""The X rows of a scikit-learn MLP fit as the compiled loop reads them: dense, or a CSR matrix
that is never densified.

A dense X reaches the loop as it is (C-contiguous, in the arena dtype). A sparse X (scikit-learn
accepts CSR and CSC) is packed once into the program's graph data (:mod:`nnjit.graph.csr_rows`:
int64 indices, float64 values, the training rows then the validation rows), and the loop's X is
an ``(N, 1)`` column of row numbers into it: the program's first layer is a
:class:`~nnjit.nn.sparse_linear.SparseLinear`, which reads each batch row's non-zeros there. The
loop's X is a 2-D float array either way, so a sparse fit runs the compiled loop and batch loader
of a dense one; only the sparse family is compiled for it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from nnjit.data.adapt import empty_rows
from nnjit.graph.csr_rows import pack_rows, row_ids


class EngineRows:
    """``X`` (and ``X_val``, None when the fit validates nothing) for the compiled loop.

    Attributes:
        sparse: X is a sparse matrix (the structure's first layer is a SparseLinear).
        X, X_val: what the loop reads: the dense rows, or row numbers; ``X_val`` has no rows
            when there is no validation set.
        gdata: the packed CSR rows (sparse), else None.
    """

    def __init__(self, X, X_val, dtype):
        dtype = np.dtype(dtype)
        self.sparse = sp.issparse(X)
        n = X.shape[0]
        if not self.sparse:
            self.gdata = None
            self.X = np.ascontiguousarray(X, dtype=dtype)
            self.X_val = (empty_rows(dtype, X.shape[1]) if X_val is None
                          else np.ascontiguousarray(X_val, dtype=dtype))
            return
        self.gdata = pack_rows(X, *(() if X_val is None else (X_val,)))
        self.X = row_ids(0, n, dtype)
        self.X_val = empty_rows(dtype, 1) if X_val is None else row_ids(n, X_val.shape[0], dtype)

    def bind(self, net) -> None:
        """Hand a sparse fit's rows to ``net`` (a :class:`~nnjit.sklearn.compiled_mlp.CompiledMLP`
        of a sparse structure)."""
        if self.sparse:
            net.use_rows(self.gdata)
