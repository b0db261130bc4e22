"""The int64 "graph data" array a graph program hands to compiled code, and its layout.

A graph op's record names a CSR by number (``aux0``: :data:`GRAPH_RAW` the graph's edges,
:data:`GRAPH_LOOPS` the same with one self loop per node, :data:`GRAPH_FEATURES` the sparse
feature matrix). This array says where each CSR lives::

    [mode, num_nodes, (indptr offset, index offset, rows) x N_CSR, ...int64 payload...]

so the compiled code finds ``indptr = gdata[o : o + rows + 1]`` and ``src = gdata[o2 : o2 + E]``
with ``E = indptr[rows]``. Programs without graph ops get a header that says "no graph".
"""

from __future__ import annotations

import numpy as np

from nnjit.graph.opcodes import GRAPH_FEATURES, GRAPH_LOOPS, GRAPH_RAW
from nnjit.kernels._jit import jit
from nnjit.kernels.views import view1d

G_MODE, G_NUM_NODES, G_CSR = 0, 1, 2
N_CSR = 3
G_HEADER = G_CSR + 3 * N_CSR

MODE_NONE, MODE_FULL_BATCH = 0, 1

CSR_NAMES = {GRAPH_RAW: "edges", GRAPH_LOOPS: "edges with self loops",
             GRAPH_FEATURES: "sparse features"}


@jit
def csr_of(gdata, k):
    """(indptr, indices) of CSR ``k`` as borrowed views of ``gdata``."""
    base = G_CSR + 3 * k
    rows = gdata[base + 2]
    indptr = view1d(gdata, gdata[base], rows + 1)
    return indptr, view1d(gdata, gdata[base + 1], indptr[rows])


def no_graph() -> np.ndarray:
    """The graph data of a program without graph ops."""
    out = np.zeros(G_HEADER, dtype=np.int64)
    out[G_MODE] = MODE_NONE
    return out


def pack(num_nodes: int, csrs: dict[int, tuple[np.ndarray, np.ndarray]],
         mode: int = MODE_FULL_BATCH) -> np.ndarray:
    """One int64 array holding the header and the CSRs ``{k: (indptr, indices)}``."""
    parts = [np.zeros(G_HEADER, dtype=np.int64)]
    offset = G_HEADER
    header = parts[0]
    header[G_MODE] = mode
    header[G_NUM_NODES] = num_nodes
    for k in range(N_CSR):
        if k not in csrs:
            # an empty CSR with zero rows: indptr = [0]
            header[G_CSR + 3 * k : G_CSR + 3 * k + 3] = (offset, offset, 0)
            parts.append(np.zeros(1, dtype=np.int64))
            offset += 1
            continue
        indptr, indices = csrs[k]
        header[G_CSR + 3 * k : G_CSR + 3 * k + 3] = (offset, offset + len(indptr), len(indptr) - 1)
        parts += [np.asarray(indptr, dtype=np.int64), np.asarray(indices, dtype=np.int64)]
        offset += len(indptr) + len(indices)
    return np.concatenate(parts)
