"""Graph (message-passing) kernels: the edge primitives GCN, GraphSAGE and GAT reduce to.

As PyG's ``torch_geometric.utils`` scatter and softmax ops, every layer is a composition of a few
edge-wise primitives, each with its forward and backward side by side here:

=========================  ================================================================
``spmm``                   weighted (or unit) sum of source rows into targets: GCN, SAGE mean
                           and sum, GAT's attention-weighted aggregation (per head)
``scatter_max``            per-column max over incoming neighbours (SAGE max)
``segment_softmax``        softmax over each target's incoming edges, per head (GAT)
``head_dot``               per-head dot product of node rows with an attention vector (GAT)
``head_mean``              mean of the heads' column blocks (GAT with ``concat=False``)
``edge_gather_add``        ``a_src[source] + a_dst[target]`` per edge (GAT logits)
``csr_dense``              sparse (CSR) features times dense weights (bag-of-words input);
                           through a transposed scratch of the weights (2-5x faster)
``gcn_norm_weights``,      edge weights of a CSR: symmetric GCN normalisation, 1 / in-degree
``mean_weights``
=========================  ================================================================

Conventions (PyG's ``flow='source_to_target'``):

- The graph is a CSR **grouped by target**: ``indptr`` int64 ``(n_dst + 1,)`` and ``src`` int64
  ``(E,)``, the source node of each edge; the incoming edges of target ``i`` are positions
  ``indptr[i]:indptr[i + 1]`` (:func:`nnjit.data.graph.to_csr` builds it from an ``edge_index``).
  Edge arrays ``(E, H)`` are in this CSR order. Source and target node sets may differ (bipartite,
  e.g. a sampled subgraph), except for :func:`gcn_norm_weights`.
- Node matrices are 2-D C-contiguous float32 or float64 arrays (views of the interpreter's arena);
  the same source compiles for both. Constants are built in the array's dtype. Nothing is
  allocated: outputs and gradients are preallocated by the caller.
- Multi-head features are laid out head-major in the columns: ``(N, H * C)``, head ``h`` owning
  columns ``h * C:(h + 1) * C``. ``H`` is taken from the edge/score array, ``C = F // H``.
- ``accumulate=False`` overwrites the gradient, ``True`` adds into it (the tape marks the first
  writer). A backward that scatters (``dx[src[e]] += ...``) zeroes its output first when not
  accumulating.
- A target without incoming edges ("isolated") gets 0 from every reduction (sum, mean, max).
  Zero-edge and zero-node graphs are valid.
- Inner loops run over contiguous feature columns so LLVM can vectorise them.

:func:`spmm_forward` loops over targets with ``prange`` (each target writes its own row), so
``benchmarks/parallel_builds.py`` compiles a parallel twin of it from the same source; no
training path uses that twin. The other kernels would race (the backward kernels scatter into
source rows).
"""

import math

from numba import prange

from nnjit.kernels._jit import jit
from nnjit.kernels.sparse_rows import row_outer_add, row_times

# ------------------------------------------------------------------------------------------------
# spmm: out[i] = sum_{e in seg(i)} w[e] * x[src[e]]   (per head)
# ------------------------------------------------------------------------------------------------


@jit
def spmm_forward(indptr, src, w, x, out, weighted):
    """out (N_dst, H*C) = weighted sum of source rows over each target's incoming edges.

    ``out[i, h*C + c] = sum_{e in seg(i)} w[e, h] * x[src[e], h*C + c]``.

    Args:
        indptr: int64 ``(N_dst + 1,)``; src: int64 ``(E,)`` (CSR by target).
        w: ``(E, H)`` edge weights in CSR order (GCN normalisation, 1/deg for a mean, attention
            for GAT). Ignored when ``weighted`` is False (unit weights, ``H = 1``): pass any 2-D
            array then, e.g. ``np.empty((0, 1), x.dtype)``.
        x: ``(N_src, H*C)`` source features; out: ``(N_dst, H*C)``, overwritten.
        weighted: bool.

    The target loop is a ``prange`` (each target writes its own row); this serial build runs it
    as ``range``, the benchmarks' parallel twin splits it over threads.
    """
    n_dst = out.shape[0]
    f = out.shape[1]
    zero = out.dtype.type(0.0)
    if weighted:
        n_heads = w.shape[1]
        c_per = f // n_heads if n_heads > 0 else 0
        for i in prange(n_dst):
            for k in range(f):
                out[i, k] = zero
            for e in range(indptr[i], indptr[i + 1]):
                s = src[e]
                if n_heads == 1:  # GCN, SAGE mean: one flat loop (~10-20% faster)
                    we = w[e, 0]
                    for k in range(f):
                        out[i, k] += we * x[s, k]
                    continue
                for h in range(n_heads):
                    we = w[e, h]
                    base = h * c_per
                    for c in range(c_per):
                        out[i, base + c] += we * x[s, base + c]
    else:
        for i in prange(n_dst):
            for k in range(f):
                out[i, k] = zero
            for e in range(indptr[i], indptr[i + 1]):
                s = src[e]
                for k in range(f):
                    out[i, k] += x[s, k]


@jit
def spmm_backward_x(indptr, src, w, dy, dx, weighted, accumulate):
    """dx (N_src, H*C) (+)= the transpose of :func:`spmm_forward` applied to dy (N_dst, H*C).

    ``dx[src[e], h*C + c] += w[e, h] * dy[i, h*C + c]`` for every edge ``e`` of target ``i``;
    ``w`` is ignored unless ``weighted`` (as in the forward). Sources without outgoing edges get 0
    (or keep their content when ``accumulate``).
    """
    zero = dx.dtype.type(0.0)
    if not accumulate:
        for r in range(dx.shape[0]):
            for k in range(dx.shape[1]):
                dx[r, k] = zero
    n_dst = dy.shape[0]
    f = dy.shape[1]
    if weighted:
        n_heads = w.shape[1]
        c_per = f // n_heads if n_heads > 0 else 0
        for i in range(n_dst):
            for e in range(indptr[i], indptr[i + 1]):
                s = src[e]
                if n_heads == 1:
                    we = w[e, 0]
                    for k in range(f):
                        dx[s, k] += we * dy[i, k]
                    continue
                for h in range(n_heads):
                    we = w[e, h]
                    base = h * c_per
                    for c in range(c_per):
                        dx[s, base + c] += we * dy[i, base + c]
    else:
        for i in range(n_dst):
            for e in range(indptr[i], indptr[i + 1]):
                s = src[e]
                for k in range(f):
                    dx[s, k] += dy[i, k]


@jit
def spmm_backward_w(indptr, src, x, dy, dw, accumulate):
    """dw (E, H) (+)= ``sum_c dy[i, h*C + c] * x[src[e], h*C + c]`` for edge ``e`` of target ``i``.

    x: ``(N_src, H*C)``, dy: ``(N_dst, H*C)``; ``H = dw.shape[1]``.
    """
    n_dst = dy.shape[0]
    n_heads = dw.shape[1]
    c_per = dy.shape[1] // n_heads if n_heads > 0 else 0
    zero = dw.dtype.type(0.0)
    for i in range(n_dst):
        for e in range(indptr[i], indptr[i + 1]):
            s = src[e]
            for h in range(n_heads):
                base = h * c_per
                acc = zero
                for c in range(c_per):
                    acc += dy[i, base + c] * x[s, base + c]
                if accumulate:
                    dw[e, h] += acc
                else:
                    dw[e, h] = acc


# ------------------------------------------------------------------------------------------------
# scatter max (GraphSAGE max aggregation)
# ------------------------------------------------------------------------------------------------


@jit
def scatter_max_forward(indptr, src, x, out, arg):
    """out (N_dst, F) = per-column max of the incoming neighbours' rows of x (N_src, F).

    ``arg`` (N_dst, F), same dtype as x, receives the winning **edge position** as a float, the
    first maximum winning ties; an isolated target gets ``out = 0`` and ``arg = -1``. Edge
    positions are exact in float32 up to 2**24 (16.7 M edges). A NaN is kept only when it is the
    first neighbour's value (comparisons with NaN are false), as ``max`` in plain Python.
    """
    n_dst = out.shape[0]
    f = out.shape[1]
    zero = out.dtype.type(0.0)
    none = arg.dtype.type(-1.0)
    for i in range(n_dst):
        start = indptr[i]
        stop = indptr[i + 1]
        if start == stop:
            for k in range(f):
                out[i, k] = zero
                arg[i, k] = none
            continue
        s = src[start]
        first = arg.dtype.type(start)
        for k in range(f):
            out[i, k] = x[s, k]
            arg[i, k] = first
        for e in range(start + 1, stop):
            s = src[e]
            pos = arg.dtype.type(e)
            for k in range(f):
                v = x[s, k]
                better = v > out[i, k]
                out[i, k] = v if better else out[i, k]
                arg[i, k] = pos if better else arg[i, k]


@jit
def scatter_max_backward(arg, src, dy, dx, accumulate):
    """dx (N_src, F) (+)= dy (N_dst, F) routed to the winning source: ``dx[src[arg[i, k]], k]``.

    Entries with ``arg = -1`` (isolated targets) pass no gradient.
    """
    zero = dx.dtype.type(0.0)
    if not accumulate:
        for r in range(dx.shape[0]):
            for k in range(dx.shape[1]):
                dx[r, k] = zero
    for i in range(dy.shape[0]):
        for k in range(dy.shape[1]):
            a = arg[i, k]
            if a >= zero:
                dx[src[int(a)], k] += dy[i, k]


# ------------------------------------------------------------------------------------------------
# segment softmax (GAT attention over incoming edges)
# ------------------------------------------------------------------------------------------------


@jit
def segment_softmax_forward(indptr, scores, out):
    """out (E, H) = softmax of scores (E, H) over each target's incoming edges, per head.

    The segment maximum is subtracted first, so large scores do not overflow. ``out`` may be
    ``scores`` itself.
    """
    n_heads = scores.shape[1]
    for i in range(indptr.shape[0] - 1):
        start = indptr[i]
        stop = indptr[i + 1]
        if start == stop:
            continue
        for h in range(n_heads):
            m = scores[start, h]
            for e in range(start + 1, stop):
                v = scores[e, h]
                m = v if v > m else m
            total = scores.dtype.type(0.0)
            for e in range(start, stop):
                p = math.exp(scores[e, h] - m)
                out[e, h] = p
                total += p
            inv = out.dtype.type(1.0) / total
            for e in range(start, stop):
                out[e, h] *= inv


@jit
def segment_softmax_backward(indptr, out, dy, dscores, accumulate):
    """dscores (E, H) (+)= ``out * (dy - sum_{e' in seg} out[e'] * dy[e'])`` per segment and head.

    ``out`` is the forward's output (so the scores need not be kept); dscores must not alias
    out or dy. When overwriting, the first row of each segment holds the per-head dot products
    until it is written last, so every loop runs over contiguous heads (Cora, 8 heads: 115 us
    against 198 us); accumulating (no free row) and one head (faster as is) loop head by head.
    """
    n_heads = out.shape[1]
    for i in range(indptr.shape[0] - 1):
        start = indptr[i]
        stop = indptr[i + 1]
        if start == stop:
            continue
        if accumulate or n_heads == 1:
            for h in range(n_heads):
                dot = out.dtype.type(0.0)
                for e in range(start, stop):
                    dot += out[e, h] * dy[e, h]
                for e in range(start, stop):
                    g = out[e, h] * (dy[e, h] - dot)
                    if accumulate:
                        dscores[e, h] += g
                    else:
                        dscores[e, h] = g
            continue
        for h in range(n_heads):
            dscores[start, h] = out[start, h] * dy[start, h]
        for e in range(start + 1, stop):
            for h in range(n_heads):
                dscores[start, h] += out[e, h] * dy[e, h]
        for e in range(stop - 1, start - 1, -1):     # row ``start`` (the dots) last
            for h in range(n_heads):
                dscores[e, h] = out[e, h] * (dy[e, h] - dscores[start, h])


# ------------------------------------------------------------------------------------------------
# per-head dot product with an attention vector (GAT: a_src = x . att_src, a_dst = x . att_dst)
# ------------------------------------------------------------------------------------------------


@jit
def head_dot_forward(x, att, out):
    """out (N, H)[n, h] = ``sum_c x[n, h*C + c] * att[h*C + c]``; x (N, H*C).

    ``att`` may be flat ``(H*C,)`` or ``(1, H*C)`` (PyG's ``(1, H, C)`` flattened); it must be
    C-contiguous.
    """
    a = att.reshape(att.size)
    n_heads = out.shape[1]
    c_per = x.shape[1] // n_heads if n_heads > 0 else 0
    zero = out.dtype.type(0.0)
    for n in range(x.shape[0]):
        for h in range(n_heads):
            base = h * c_per
            acc = zero
            for c in range(c_per):
                acc += x[n, base + c] * a[base + c]
            out[n, h] = acc


@jit
def head_dot_backward_x(att, dy, dx, accumulate):
    """dx (N, H*C) (+)= ``dy[n, h] * att[h*C + c]``; dy (N, H); att flat or ``(1, H*C)``."""
    a = att.reshape(att.size)
    n_heads = dy.shape[1]
    c_per = dx.shape[1] // n_heads if n_heads > 0 else 0
    for n in range(dx.shape[0]):
        for h in range(n_heads):
            g = dy[n, h]
            base = h * c_per
            if accumulate:
                for c in range(c_per):
                    dx[n, base + c] += g * a[base + c]
            else:
                for c in range(c_per):
                    dx[n, base + c] = g * a[base + c]


@jit
def head_dot_backward_att(x, dy, datt, accumulate):
    """datt (+)= ``sum_n dy[n, h] * x[n, h*C + c]`` at ``h*C + c``; x (N, H*C), dy (N, H).

    ``datt`` may be flat ``(H*C,)`` or ``(1, H*C)``, like ``att`` (C-contiguous, written in place).
    """
    d = datt.reshape(datt.size)
    n_heads = dy.shape[1]
    c_per = x.shape[1] // n_heads if n_heads > 0 else 0
    if not accumulate:
        zero = d.dtype.type(0.0)
        for k in range(d.shape[0]):
            d[k] = zero
    for n in range(x.shape[0]):
        for h in range(n_heads):
            g = dy[n, h]
            base = h * c_per
            for c in range(c_per):
                d[base + c] += g * x[n, base + c]


@jit
def head_mean_forward(x, out):
    """out (N, C) = the mean of x's (N, H*C) H column blocks of width C (GAT, ``concat=False``)."""
    width = out.shape[1]
    heads = x.shape[1] // width if width > 0 else 0
    inv = out.dtype.type(1.0 / max(heads, 1))
    for r in range(out.shape[0]):
        for k in range(width):
            out[r, k] = x[r, k]
        for h in range(1, heads):
            for k in range(width):
                out[r, k] += x[r, h * width + k]
        for k in range(width):
            out[r, k] *= inv


@jit
def head_mean_backward(dy, dx, accumulate):
    """dx (N, H*C) (+)= dy (N, C) / H in every head's block."""
    width = dy.shape[1]
    heads = dx.shape[1] // width if width > 0 else 0
    inv = dy.dtype.type(1.0 / max(heads, 1))
    for r in range(dy.shape[0]):
        for h in range(heads):
            base = h * width
            for k in range(width):
                if accumulate:
                    dx[r, base + k] += dy[r, k] * inv
                else:
                    dx[r, base + k] = dy[r, k] * inv


# ------------------------------------------------------------------------------------------------
# edge gather-add (GAT logits before LeakyReLU): out[e] = a_src[src[e]] + a_dst[i]
# ------------------------------------------------------------------------------------------------


@jit
def edge_gather_add_forward(indptr, src, a_src, a_dst, out):
    """out (E, H)[e] = a_src (N_src, H)[src[e]] + a_dst (N_dst, H)[i] for e in seg(i)."""
    n_heads = out.shape[1]
    for i in range(indptr.shape[0] - 1):
        for e in range(indptr[i], indptr[i + 1]):
            s = src[e]
            for h in range(n_heads):
                out[e, h] = a_src[s, h] + a_dst[i, h]


@jit
def edge_gather_add_backward(indptr, src, dy, da_src, da_dst, acc_src, acc_dst, need_src,
                             need_dst):
    """Gradients of :func:`edge_gather_add_forward` from dy (E, H).

    ``da_src[src[e]] (+)= dy[e]`` (summed over the source's outgoing edges) when ``need_src``;
    ``da_dst[i] (+)= sum_{e in seg(i)} dy[e]`` when ``need_dst``. ``acc_src``/``acc_dst`` say
    whether to add into (True) or overwrite each gradient. An array that is not needed is not
    touched (pass any 2-D array of the same dtype).
    """
    n_heads = dy.shape[1]
    zero = dy.dtype.type(0.0)
    if need_src and not acc_src:
        for r in range(da_src.shape[0]):
            for h in range(da_src.shape[1]):
                da_src[r, h] = zero
    if need_dst and not acc_dst:
        for r in range(da_dst.shape[0]):
            for h in range(da_dst.shape[1]):
                da_dst[r, h] = zero
    if not (need_src or need_dst):
        return
    for i in range(indptr.shape[0] - 1):
        for e in range(indptr[i], indptr[i + 1]):
            if need_src:
                s = src[e]
                for h in range(n_heads):
                    da_src[s, h] += dy[e, h]
            if need_dst:
                for h in range(n_heads):
                    da_dst[i, h] += dy[e, h]


# ------------------------------------------------------------------------------------------------
# sparse features (CSR) times dense weights: out = X @ w.T + b
# ------------------------------------------------------------------------------------------------


@jit
def csr_dense_forward(x_indptr, x_indices, x_data, w, w_t, b, out, has_bias):
    """out (N, O) = X (N, F, CSR) @ w (O, F).T + b (O,) (b ignored unless ``has_bias``).

    ``X`` is given by ``x_indptr`` int64 ``(N + 1,)``, ``x_indices`` int64 ``(nnz,)`` (column
    indices) and ``x_data`` ``(nnz,)`` of w's dtype (scipy's ``csr_matrix`` arrays after
    ``astype``). Cost ``O(nnz * O)`` instead of ``O(N * F * O)``.

    ``w_t`` (F, O) is scratch of w's dtype, overwritten with ``w.T``, so the inner loop
    ``out[r, :] += v * w_t[j, :]`` reads one contiguous row per non-zero and vectorises. On Cora
    (2708 x 1433, 49,216 non-zeros, float32, under load, same-process minima) 0.27 ms against
    0.48 ms reading strided columns of w (O = 16) and 0.50 ms against 2.5 ms (O = 64), the
    transposition (F * O copies) included; one output column at a time (gathered dot products)
    took 0.78 ms at O = 16, torch's dense product on one thread 1.8 ms.
    """
    n_out = w.shape[0]
    f = w.shape[1]
    for o in range(n_out):
        for j in range(f):
            w_t[j, o] = w[o, j]
    zero = out.dtype.type(0.0)
    for r in range(out.shape[0]):
        for o in range(n_out):
            out[r, o] = b[o] if has_bias else zero
        row_times(x_indices, x_data, x_indptr[r], x_indptr[r + 1], w_t, out, r)


@jit
def csr_dense_backward_w(x_indptr, x_indices, x_data, dy, dw, dw_t, accumulate):
    """dw (O, F) (+)= dy (N, O).T @ X (N, F, CSR). No input gradient: features are data.

    Accumulates ``dw_t[j, :] += v * dy[r, :]`` in the scratch ``dw_t`` (F, O) (contiguous), then
    writes or adds ``dw_t.T`` into dw. On Cora 0.20 ms against 0.52 ms adding into strided
    columns of dw (O = 16), 0.40 ms against 2.2 ms (O = 64). The bias gradient is the column
    sum of dy: :func:`nnjit.kernels.dense.dense_backward_bias`.
    """
    n_out = dw.shape[0]
    f = dw.shape[1]
    zero = dw.dtype.type(0.0)
    for j in range(f):
        for o in range(n_out):
            dw_t[j, o] = zero
    for r in range(dy.shape[0]):
        row_outer_add(x_indices, x_data, x_indptr[r], x_indptr[r + 1], dy, r, dw_t)
    for o in range(n_out):
        if accumulate:
            for j in range(f):
                dw[o, j] += dw_t[j, o]
        else:
            for j in range(f):
                dw[o, j] = dw_t[j, o]


# ------------------------------------------------------------------------------------------------
# edge weights of a CSR (per sampled subgraph): GCN normalisation and 1 / in-degree
# ------------------------------------------------------------------------------------------------


@jit
def gcn_norm_weights(indptr, src, out_w):
    """out_w (E, 1)[e] = ``1/sqrt(deg(src[e])) * 1/sqrt(deg(i))`` for e in seg(i).

    ``deg`` is the in-degree (``indptr[i + 1] - indptr[i]``), so the CSR must already contain the
    self loops (and be square: every ``src[e] < N``). Equal to :func:`nnjit.data.graph.gcn_norm`
    on the same edges (computed in float64, stored in out_w's dtype); a degree-0 source (possible
    only without self loops) gives weight 0, as PyG.
    """
    for i in range(indptr.shape[0] - 1):
        start = indptr[i]
        stop = indptr[i + 1]
        if start == stop:
            continue
        di = 1.0 / math.sqrt(float(stop - start))
        for e in range(start, stop):
            s = src[e]
            ds = indptr[s + 1] - indptr[s]
            out_w[e, 0] = di / math.sqrt(float(ds)) if ds > 0 else 0.0


@jit
def mean_weights(indptr, out_w):
    """out_w (E, 1)[e] = ``1 / deg(i)`` for e in seg(i): spmm with these weights is a mean."""
    for i in range(indptr.shape[0] - 1):
        start = indptr[i]
        stop = indptr[i + 1]
        if start == stop:
            continue
        inv = 1.0 / float(stop - start)
        for e in range(start, stop):
            out_w[e, 0] = inv

