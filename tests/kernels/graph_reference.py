"""Slow, obviously correct NumPy references for ``nnjit.kernels.graph_ops`` (as stumpy's naive.py).

Each reference works from the edge list (``targets_of(indptr)``, ``src``) or a dense adjacency,
in float64, with no shared code with the kernels.
"""

from __future__ import annotations

import numpy as np


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


def spmm(indptr, src, w, x, weighted):
    """out (n_dst, H*C) = A_h @ x_h per head (dense adjacency formulation)."""
    x = np.asarray(x, np.float64)
    if not weighted:
        return adjacency(indptr, src, x.shape[0]) @ x
    a = adjacency(indptr, src, x.shape[0], w)
    heads = a.shape[0]
    c = x.shape[1] // heads
    return np.concatenate([a[h] @ x[:, h * c:(h + 1) * c] for h in range(heads)], axis=1)


def scatter_max(indptr, src, x):
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


def segment_softmax(indptr, scores):
    scores = np.asarray(scores, np.float64)
    out = np.zeros_like(scores)
    for i in range(len(indptr) - 1):
        seg = scores[indptr[i]:indptr[i + 1]]
        if seg.shape[0]:
            p = np.exp(seg - seg.max(axis=0))
            out[indptr[i]:indptr[i + 1]] = p / p.sum(axis=0)
    return out


def head_dot(x, att, heads):
    x = np.asarray(x, np.float64)
    att = np.asarray(att, np.float64).reshape(-1)
    n = x.shape[0]
    return (x.reshape(n, heads, x.shape[1] // heads) * att.reshape(1, heads, -1)).sum(axis=2)


def edge_gather_add(indptr, src, a_src, a_dst):
    return np.asarray(a_src, np.float64)[src] + np.asarray(a_dst, np.float64)[targets_of(indptr)]


def csr_dense(x_csr_dense, w, b):
    """The dense formulation X @ w.T + b (b may be None)."""
    out = np.asarray(x_csr_dense, np.float64) @ np.asarray(w, np.float64).T
    return out if b is None else out + np.asarray(b, np.float64)


def gcn_norm(indptr, src):
    deg = np.diff(indptr).astype(np.float64)
    with np.errstate(divide="ignore"):
        dis = deg ** -0.5
    dis[np.isinf(dis)] = 0.0
    return (dis[src] * dis[targets_of(indptr)]).reshape(-1, 1)


def mean(indptr):
    deg = np.diff(indptr).astype(np.float64)
    return (1.0 / deg[targets_of(indptr)]).reshape(-1, 1)
