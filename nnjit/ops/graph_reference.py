"""Float64 NumPy references of the graph ops: slow, obviously correct, no code shared with the
kernels of ``nnjit/kernels/graph_ops.py`` (as stumpy's ``naive.py``).

The graph family's specs point their ``OpSpec.reference`` at the eight functions of the last
section, all called ``reference(graph, *inputs, **hyper)`` with the op's inputs in record order
(an optional input left out is None) and ``graph`` an :class:`OpGraph`:

- ``graph.indptr`` / ``graph.src``: the CSR, grouped by target, of the edge set the op's record
  names in aux0 (the graph's edges, or the same with one self loop per node). Edge inputs and
  outputs hold one row per position of this CSR, in its order; node inputs and outputs one row
  per node.
- ``graph.num_nodes``: N (node rows); ``graph.num_src``: rows of the source side (N too for every
  op the interpreter runs; the kernel tests also draw bipartite graphs).
- ``graph.features``: for CSR_DENSE only, the sparse feature matrix's structure
  ``(indptr, indices, num_columns)``; its non-zero values are the op's first input.

The helpers above them (:func:`targets_of`, :func:`csr_from_edges`, :func:`with_self_loops`,
:func:`adjacency`) build such graphs from an edge list and work from the edge list or a dense
adjacency, the formulation the kernels do not use.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# EDGE_WEIGHTS' kinds (aux1), by name and by the number the record stores.
EDGE_WEIGHT_KINDS = {"gcn": 0, "mean": 1}


@dataclass(frozen=True)
class OpGraph:
    """The graph one graph op runs on, as its reference reads it (see the module docstring)."""

    indptr: np.ndarray
    src: np.ndarray
    num_src: int
    features: tuple[np.ndarray, np.ndarray, int] | None = None

    @property
    def num_nodes(self) -> int:
        return len(self.indptr) - 1

    @property
    def num_edges(self) -> int:
        return len(self.src)

    @classmethod
    def from_edges(cls, src, dst, num_nodes: int, num_src: int | None = None,
                   features=None) -> OpGraph:
        """The CSR by target of the edges ``src[e] -> dst[e]`` (stable within a target)."""
        indptr, src_sorted, _ = csr_from_edges(src, dst, num_nodes)
        return cls(indptr, src_sorted, num_nodes if num_src is None else int(num_src), features)


# ------------------------------------------------------------------------------------------------
# graphs
# ------------------------------------------------------------------------------------------------


def targets_of(indptr) -> np.ndarray:
    """int64 (E,): the target node of each CSR position."""
    deg = np.diff(np.asarray(indptr))
    return np.repeat(np.arange(deg.size, dtype=np.int64), deg)


def csr_from_edges(src, dst, n_dst):
    """(indptr, src_sorted, order): edges grouped by target, stable within a target."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(n_dst + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n_dst), out=indptr[1:])
    return indptr, np.ascontiguousarray(src[order]), order


def with_self_loops(src, dst, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The edges without their self loops, then one loop per node (GCN's and GAT's A + I)."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    keep = src != dst
    loops = np.arange(num_nodes, dtype=np.int64)
    return np.concatenate([src[keep], loops]), np.concatenate([dst[keep], loops])


def adjacency(indptr, src, n_src, w=None) -> np.ndarray:
    """Dense (n_dst, n_src) or, with per-edge weights w (E, H), (H, n_dst, n_src) adjacency."""
    dst = targets_of(indptr)
    n_dst = len(indptr) - 1
    if w is None:
        a = np.zeros((n_dst, n_src))
        np.add.at(a, (dst, src), 1.0)
        return a
    w = np.asarray(w, np.float64)
    a = np.zeros((w.shape[1], n_dst, n_src))
    for h in range(w.shape[1]):
        np.add.at(a[h], (dst, src), w[:, h])
    return a


# ------------------------------------------------------------------------------------------------
# the computations, on explicit arrays
# ------------------------------------------------------------------------------------------------


def spmm_dense(indptr, src, w, x, weighted):
    """out (n_dst, H*C) = A_h @ x_h per head (dense adjacency formulation)."""
    x = np.asarray(x, np.float64)
    if not weighted:
        return adjacency(indptr, src, x.shape[0]) @ x
    a = adjacency(indptr, src, x.shape[0], w)
    heads = a.shape[0]
    c = x.shape[1] // heads
    return np.concatenate([a[h] @ x[:, h * c:(h + 1) * c] for h in range(heads)], axis=1)


def scatter_max_with_arg(indptr, src, x):
    """(out, arg): per-column max over incoming rows (0 / -1 when isolated), first max wins."""
    x = np.asarray(x, np.float64)
    n_dst = len(indptr) - 1
    out = np.zeros((n_dst, x.shape[1]))
    arg = -np.ones((n_dst, x.shape[1]))
    for i in range(n_dst):
        edges = np.arange(indptr[i], indptr[i + 1])
        if edges.size:
            vals = x[src[edges]]                      # (deg, F)
            best = np.argmax(vals, axis=0)            # first occurrence of the max
            out[i] = vals[best, np.arange(x.shape[1])]
            arg[i] = edges[best]
    return out, arg


def segment_softmax_edges(indptr, scores):
    """Softmax of (E, H) scores over each target's edges, per column."""
    scores = np.asarray(scores, np.float64)
    out = np.zeros_like(scores)
    for i in range(len(indptr) - 1):
        seg = scores[indptr[i]:indptr[i + 1]]
        if seg.shape[0]:
            p = np.exp(seg - seg.max(axis=0))
            out[indptr[i]:indptr[i + 1]] = p / p.sum(axis=0)
    return out


def head_dot_dense(x, att, heads):
    """(N, H): per head, the dot product of x's column block with att's."""
    x = np.asarray(x, np.float64)
    att = np.asarray(att, np.float64).reshape(-1)
    n = x.shape[0]
    return (x.reshape(n, heads, x.shape[1] // heads) * att.reshape(1, heads, -1)).sum(axis=2)


def gather_add_edges(indptr, src, a_src, a_dst):
    """Per edge j -> i: a_src[j] + a_dst[i]."""
    return np.asarray(a_src, np.float64)[src] + np.asarray(a_dst, np.float64)[targets_of(indptr)]


def dense_plus_bias(x_dense, w, b):
    """The dense formulation X @ w.T + b (b may be None)."""
    out = np.asarray(x_dense, np.float64) @ np.asarray(w, np.float64).T
    return out if b is None else out + np.asarray(b, np.float64).reshape(1, -1)


def gcn_norm(indptr, src):
    """(E, 1): 1 / sqrt(deg(src) deg(dst)) with in-degrees of this CSR (0 where a degree is 0)."""
    deg = np.diff(indptr).astype(np.float64)
    with np.errstate(divide="ignore"):
        dis = deg ** -0.5
    dis[np.isinf(dis)] = 0.0
    return (dis[src] * dis[targets_of(indptr)]).reshape(-1, 1)


def mean(indptr):
    """(E, 1): 1 / in-degree of each edge's target."""
    deg = np.diff(indptr).astype(np.float64)
    return (1.0 / deg[targets_of(indptr)]).reshape(-1, 1)


def features_dense(features, nonzeros) -> np.ndarray:
    """The dense (N, F) matrix of the CSR structure ``(indptr, indices, F)`` and its values."""
    indptr, indices, cols = features
    values = np.asarray(nonzeros, np.float64).reshape(-1)
    dense = np.zeros((len(indptr) - 1, cols))
    rows = targets_of(indptr)
    np.add.at(dense, (rows, np.asarray(indices, np.int64)), values)
    return dense


# ------------------------------------------------------------------------------------------------
# the ops: reference(graph, *inputs, **hyper)
# ------------------------------------------------------------------------------------------------


def spmm(graph: OpGraph, x, weights=None, bias=None):
    """SPMM: ``out[i] = sum over edges j -> i of weights[e] * x[j] (+ bias)``, per head."""
    out = spmm_dense(graph.indptr, graph.src, weights, x, weights is not None)
    return out if bias is None else out + np.asarray(bias, np.float64).reshape(1, -1)


def edge_weights(graph: OpGraph, kind="gcn"):
    """EDGE_WEIGHTS: (E, 1) GCN normalisation or 1 / in-degree (``kind`` by name or number)."""
    kind = EDGE_WEIGHT_KINDS.get(kind, kind)
    if kind == EDGE_WEIGHT_KINDS["gcn"]:
        return gcn_norm(graph.indptr, graph.src)
    if kind == EDGE_WEIGHT_KINDS["mean"]:
        return mean(graph.indptr)
    raise ValueError(f"edge_weights: unknown kind {kind!r}; valid: {sorted(EDGE_WEIGHT_KINDS)}")


def scatter_max(graph: OpGraph, x):
    """SCATTER_MAX: per column, the max over each node's incoming rows (0 without any)."""
    return scatter_max_with_arg(graph.indptr, graph.src, x)[0]


def segment_softmax(graph: OpGraph, scores):
    """SEGMENT_SOFTMAX: softmax of (E, H) scores over each node's incoming edges."""
    return segment_softmax_edges(graph.indptr, scores)


def head_dot(graph: OpGraph, x, att, *, heads):
    """HEAD_DOT: (N, H) per-head dot products of x (N, H*C) with att (1, H*C)."""
    return head_dot_dense(x, att, int(heads))


def edge_gather_add(graph: OpGraph, a_src, a_dst):
    """EDGE_GATHER_ADD: per edge j -> i, ``a_src[j] + a_dst[i]`` (E, H)."""
    return gather_add_edges(graph.indptr, graph.src, a_src, a_dst)


def csr_dense(graph: OpGraph, nonzeros, weight, bias=None):
    """CSR_DENSE: ``X @ weight.T + bias`` with X the sparse features (``graph.features``)."""
    if graph.features is None:
        raise ValueError("csr_dense: the graph has no sparse features (graph.features)")
    return dense_plus_bias(features_dense(graph.features, nonzeros), weight, bias)


def head_mean(graph: OpGraph, x, bias=None, *, heads):
    """HEAD_MEAN: (N, C), the mean of x's H column blocks (plus bias (1, C))."""
    x = np.asarray(x, np.float64)
    h = int(heads)
    out = x.reshape(x.shape[0], h, x.shape[1] // h).mean(axis=1)
    return out if bias is None else out + np.asarray(bias, np.float64).reshape(1, -1)


__all__ = ["OpGraph", "spmm", "edge_weights", "scatter_max", "segment_softmax", "head_dot",
           "edge_gather_add", "csr_dense", "head_mean"]
