"""A sparse (CSR) input matrix in the int64 array compiled code reads beside the arena.

A program's "graph data" (:mod:`nnjit.graph.graph_data`: an int64 array the compiled loop
hands to every op) can carry the rows of a CSR matrix instead of a graph: the input of the
sparse family's SPARSE_LINEAR (:mod:`nnjit.ops.sparse`). The minibatches then reach the
compiled loop as row numbers (an integer input column: X is ``(N, 1)``, see :func:`row_ids`),
which the plain batch loader copies as it copies any integer input, and the op reads each
row's non-zeros straight from this array: no batch is densified, and X's type (a 2-D float
array) is a dense fit's, so no compiled function but the sparse family's is built for it.

Layout: the graph data header (:data:`~nnjit.graph.graph_data.G_HEADER` entries, mode
:data:`~nnjit.graph.graph_data.MODE_CSR_ROWS`: no graph for graph code and the engine's per-call
resets), then::

    [rows, cols, indptr offset, indices offset, values offset, ...payload]

``indptr`` (rows + 1) and ``indices`` (column of each non-zero) are int64; ``values`` are the
non-zeros as float64 (exact for float32 data too), stored as their bits. Several matrices (the
training and the validation rows) are stacked into one: row ids of the second start after the
first's rows.
"""

from __future__ import annotations

import numpy as np

from nnjit.graph.graph_data import G_HEADER, G_MODE, MODE_CSR_ROWS, no_graph
from nnjit.kernels._jit import jit
from nnjit.kernels.views import view1d

CSR_ROWS, CSR_COLS, CSR_INDPTR, CSR_INDICES, CSR_VALUES = range(G_HEADER, G_HEADER + 5)
_PAYLOAD = G_HEADER + 5


@jit
def csr_rows(gdata):
    """(rows, cols, indptr, indices, values) of the CSR matrix packed in ``gdata`` by
    :func:`pack_rows`, as borrowed views (``values`` float64); (0, -1, ...) with views that must
    not be read when ``gdata`` holds no CSR rows."""
    if gdata[G_MODE] != MODE_CSR_ROWS:
        empty = view1d(gdata, 0, 0)
        return 0, -1, empty, empty, empty.view(np.float64)
    rows = gdata[CSR_ROWS]
    indptr = view1d(gdata, gdata[CSR_INDPTR], rows + 1)
    nnz = indptr[rows]
    indices = view1d(gdata, gdata[CSR_INDICES], nnz)
    values = view1d(gdata, gdata[CSR_VALUES], nnz).view(np.float64)
    return rows, gdata[CSR_COLS], indptr, indices, values


def pack_rows(*matrices) -> np.ndarray:
    """One int64 array (the program's graph data) holding the rows of ``matrices`` (scipy
    sparse matrices of one column count) stacked in order. Each is read as CSR; its indices
    are checked to lie in ``[0, cols)`` (compiled code reads them unchecked)."""
    import scipy.sparse as sp

    cols = matrices[0].shape[1]
    parts = [sp.csr_matrix(m) if not sp.isspmatrix_csr(m) and not isinstance(m, sp.csr_array)
             else m for m in matrices]
    rows = sum(m.shape[0] for m in parts)
    nnz = sum(int(m.indptr[-1]) for m in parts)
    out = np.zeros(_PAYLOAD + (rows + 1) + 2 * nnz, dtype=np.int64)
    out[:G_HEADER] = no_graph()
    out[G_MODE] = MODE_CSR_ROWS
    out[CSR_ROWS], out[CSR_COLS] = rows, cols
    out[CSR_INDPTR] = at = _PAYLOAD
    out[CSR_INDICES] = at + rows + 1
    out[CSR_VALUES] = at + rows + 1 + nnz
    indptr = out[at : at + rows + 1]
    indices = out[at + rows + 1 : at + rows + 1 + nnz]
    values = out[at + rows + 1 + nnz :].view(np.float64)
    row = done = 0
    for m in parts:
        if m.shape[1] != cols:
            raise ValueError(f"sparse rows: the matrices have {cols} and {m.shape[1]} columns")
        n, k = m.shape[0], int(m.indptr[-1])
        start = int(m.indptr[0])
        indptr[row + 1 : row + n + 1] = done + (m.indptr[1:] - start)
        span = slice(start, start + k)
        if k and not (0 <= int(m.indices[span].min()) and int(m.indices[span].max()) < cols):
            raise ValueError(f"sparse rows: column indices outside [0, {cols})")
        indices[done : done + k] = m.indices[span]
        values[done : done + k] = m.data[span]
        row, done = row + n, done + k
    return out


def row_ids(start: int, n: int, dtype) -> np.ndarray:
    """X of ``n`` rows starting at row ``start`` of a packed matrix: an ``(n, 1)`` integer
    column as an arena of ``dtype`` holds integer inputs (the bits of int32 in float32, of int64
    in float64: :mod:`nnjit.data.inputs`)."""
    kind = np.int32 if np.dtype(dtype) == np.float32 else np.int64
    return np.arange(start, start + n, dtype=kind).view(dtype).reshape(n, 1)
