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

from nnjit.kernels._jit import jit
from nnjit.kernels.views import view1d

# aux0 of graph ops: which CSR of this table they read.
GRAPH_RAW, GRAPH_LOOPS, GRAPH_FEATURES = 0, 1, 2
# aux1 of EDGE_WEIGHTS: which weights it computes.
EDGE_WEIGHTS_GCN, EDGE_WEIGHTS_MEAN = 0, 1

G_MODE, G_NUM_NODES, G_CSR = 0, 1, 2
N_CSR = 3
# Sampled batches only (see nnjit/graph/sampled_batch.py): the full graph's CSR, the fan-outs,
# buffers for the seeds, the sampled node ids and the global -> local map, the buffer sizes, the
# slot holding all nodes' features, and whether the model reads the CSR with self loops.
G_FULL = G_CSR + 3 * N_CSR  # indptr offset, src offset
G_FANOUTS = G_FULL + 2  # offset, count
G_SEEDS = G_FANOUTS + 2
G_NODE_IDS = G_SEEDS + 1
G_LOCAL_OF = G_NODE_IDS + 1
G_MAX_NODES = G_LOCAL_OF + 1
G_MAX_EDGES = G_MAX_NODES + 1
G_FEATURES_SLOT = G_MAX_EDGES + 1
G_NEED_LOOPS = G_FEATURES_SLOT + 1
# Full batch: bit (kind * N_CSR + csr) set once that edge-weight kind is in the arena; the
# graph does not change, so EDGE_WEIGHTS computes it once per program (cached per graph).
G_WEIGHTS_READY = G_NEED_LOOPS + 1
# Full batch: 1 once this call of the compiled loop has loaded the node features into the input
# slot; every job of a full-batch program reads the same rows, so later jobs load the targets
# only (copying the features again is the bulk of a full-batch job). Reset by Program.run at
# every call.
G_INPUT_LOADED = G_WEIGHTS_READY + 1
G_HEADER = G_INPUT_LOADED + 1

# (MODE_CSR_ROWS: no graph, the rows of a sparse input matrix: nnjit.graph.csr_rows)
MODE_NONE, MODE_FULL_BATCH, MODE_SAMPLED, MODE_CSR_ROWS = 0, 1, 2, 3

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


def pack_sampled(indptr: np.ndarray, src: np.ndarray, fanouts, batch_size: int, max_nodes: int,
                 max_edges: int) -> np.ndarray:
    """Graph data for sampled batches: the full CSR plus empty buffers the sampler fills.

    The raw and self-loop CSRs of the header point at buffers for ``max_nodes`` targets and
    ``max_edges`` (``max_edges + max_nodes``) edges; their row counts are set per batch.
    ``G_FEATURES_SLOT`` and ``G_NEED_LOOPS`` are filled in by the program once laid out.
    """
    num_nodes = len(indptr) - 1
    sizes = [("full_indptr", len(indptr)), ("full_src", len(src)), ("fanouts", len(fanouts)),
             ("seeds", batch_size), ("node_ids", max_nodes), ("local_of", num_nodes),
             ("raw_indptr", max_nodes + 1), ("raw_src", max_edges),
             ("loops_indptr", max_nodes + 1), ("loops_src", max_edges + max_nodes),
             ("features_indptr", 1)]
    offsets = {}
    offset = G_HEADER
    for name, size in sizes:
        offsets[name] = offset
        offset += size
    out = np.zeros(offset, dtype=np.int64)
    out[G_MODE] = MODE_SAMPLED
    out[G_NUM_NODES] = num_nodes
    for k, name in ((GRAPH_RAW, "raw"), (GRAPH_LOOPS, "loops"), (GRAPH_FEATURES, "features")):
        src_name = f"{name}_src" if name != "features" else "features_indptr"
        out[G_CSR + 3 * k : G_CSR + 3 * k + 3] = (offsets[f"{name}_indptr"], offsets[src_name], 0)
    out[G_FULL], out[G_FULL + 1] = offsets["full_indptr"], offsets["full_src"]
    out[G_FANOUTS], out[G_FANOUTS + 1] = offsets["fanouts"], len(fanouts)
    out[G_SEEDS] = offsets["seeds"]
    out[G_NODE_IDS] = offsets["node_ids"]
    out[G_LOCAL_OF] = offsets["local_of"]
    out[G_MAX_NODES], out[G_MAX_EDGES] = max_nodes, max_edges
    out[G_FEATURES_SLOT] = -1
    o = offsets
    out[o["full_indptr"] : o["full_indptr"] + len(indptr)] = indptr
    out[o["full_src"] : o["full_src"] + len(src)] = src
    out[o["fanouts"] : o["fanouts"] + len(fanouts)] = fanouts
    out[o["local_of"] : o["local_of"] + num_nodes] = -1
    return out
