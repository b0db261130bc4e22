"""Tests for nnjit.kernels.graph_ops: NumPy references, finite differences, accumulate, PyG.

Graphs are hypothesis-drawn and small: bipartite (n_src may differ from n_dst), with isolated
targets, self loops (when square), duplicate edges and zero edges or zero nodes. Every forward is
compared with the dense NumPy reference of ``tests/kernels/graph_reference.py`` in float64 and
float32; every backward with central finite differences of ``sum(forward * R)`` in float64, then
with ``accumulate=True`` on top of existing content (and ``False`` over garbage).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from nnjit.data.graph import gcn_norm, to_csr
from nnjit.kernels import graph_ops as G
from nnjit.kernels._jit import jit
from nnjit.kernels.dense import dense_backward_bias
from tests.helpers import count_allocations
from tests.kernels import graph_reference as R

needs_jit = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="counts NRT allocations")

DTYPES = (np.float64, np.float32)
TOL = {np.float64: {"rtol": 1e-10, "atol": 1e-10}, np.float32: {"rtol": 2e-5, "atol": 2e-5}}
EPS = 1e-6
FEW = settings(max_examples=20, deadline=None)


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


class Graph:
    """A CSR by target plus the drawn sizes and a seeded NumPy generator for values."""

    def __init__(self, n_src, n_dst, srcs, dsts, seed):
        self.n_src, self.n_dst = n_src, n_dst
        self.indptr, self.src, _ = R.csr_from_edges(srcs, dsts, n_dst)
        self.E = self.src.shape[0]
        self.rng = np.random.default_rng(seed)

    def normal(self, *shape, dtype=np.float64):
        return np.ascontiguousarray(self.rng.normal(size=shape).astype(dtype))


@st.composite
def graphs(draw, square=False, max_nodes=7, max_edges=18):
    n_src = draw(st.integers(0, max_nodes))
    n_dst = n_src if square else draw(st.integers(0, max_nodes))
    n_edges = draw(st.integers(0, max_edges)) if n_src and n_dst else 0
    srcs = draw(st.lists(st.integers(0, max(n_src - 1, 0)), min_size=n_edges, max_size=n_edges))
    # targets from a subset of the nodes: isolated targets are common
    hot = draw(st.integers(1, max(n_dst, 1)))
    dsts = draw(st.lists(st.integers(0, max(hot - 1, 0)), min_size=n_edges, max_size=n_edges))
    return Graph(n_src, n_dst, srcs, dsts, draw(st.integers(0, 2**32 - 1)))


heads_channels = st.tuples(st.integers(1, 3), st.integers(1, 3))


def numeric_grad(loss, arr, eps=EPS):
    """Central finite differences of the scalar ``loss()`` with respect to ``arr`` (in place)."""
    grad = np.zeros(arr.shape)
    flat = arr.reshape(-1)
    gflat = grad.reshape(-1)
    for k in range(flat.size):
        old = flat[k]
        flat[k] = old + eps
        up = loss()
        flat[k] = old - eps
        down = loss()
        flat[k] = old
        gflat[k] = (up - down) / (2 * eps)
    return grad


def check_backward(backward, expected, rng, fd=None):
    """``backward(buf, accumulate)`` overwrites garbage, adds onto content, and matches ``fd``."""
    buf = np.full(expected.shape, 1e3)
    backward(buf, False)
    np.testing.assert_allclose(buf, expected, rtol=1e-12, atol=1e-12)
    if fd is not None:
        np.testing.assert_allclose(buf, fd, rtol=1e-6, atol=1e-7)
    base = rng.normal(size=expected.shape)
    buf = base.copy()
    backward(buf, True)
    np.testing.assert_allclose(buf, base + expected, rtol=1e-12, atol=1e-12)


def seg_sum(indptr, values):
    """Reference: per-target sum of edge rows (E, H) -> (n_dst, H)."""
    out = np.zeros((len(indptr) - 1, values.shape[1]))
    np.add.at(out, R.targets_of(indptr), values)
    return out


def distinct_values(g, rows, cols, dtype=np.float64):
    """Values 0.1 apart in random order: no ties (or near ties) for max and finite differences."""
    vals = g.rng.permutation(rows * cols).astype(np.float64) * 0.1 - 0.05 * rows * cols
    return np.ascontiguousarray(vals.reshape(rows, cols).astype(dtype))


# ------------------------------------------------------------------------------------------------
# spmm
# ------------------------------------------------------------------------------------------------


@FEW
@given(graphs(), heads_channels, st.booleans())
def test_spmm_forward_matches_reference(g, hc, weighted):
    heads, c = hc if weighted else (1, hc[1])
    w64 = g.normal(g.E, heads)
    x64 = g.normal(g.n_src, heads * c)
    ref = R.spmm(g.indptr, g.src, w64, x64, weighted)
    for dt in DTYPES:
        out = np.full((g.n_dst, heads * c), np.nan, dt)
        w = w64.astype(dt) if weighted else np.empty((0, 1), dt)
        G.spmm_forward(g.indptr, g.src, w, x64.astype(dt), out, weighted)
        np.testing.assert_allclose(out, ref, **TOL[dt])


@FEW
@given(graphs(), heads_channels, st.booleans())
def test_spmm_backward_finite_differences(g, hc, weighted):
    heads, c = hc if weighted else (1, hc[1])
    w = g.normal(g.E, heads) if weighted else np.empty((0, 1))
    x = g.normal(g.n_src, heads * c)
    r = g.normal(g.n_dst, heads * c)
    out = np.empty((g.n_dst, heads * c))

    def loss():
        G.spmm_forward(g.indptr, g.src, w, x, out, weighted)
        return float((out * r).sum())

    # transpose of the dense adjacency: dx = A^T dy per head
    if weighted:
        a = R.adjacency(g.indptr, g.src, g.n_src, w)
        dx_ref = np.concatenate([a[h].T @ r[:, h * c:(h + 1) * c] for h in range(heads)], axis=1)
    else:
        dx_ref = R.adjacency(g.indptr, g.src, g.n_src).T @ r
    check_backward(lambda buf, acc: G.spmm_backward_x(g.indptr, g.src, w, r, buf, weighted, acc),
                   dx_ref, g.rng, numeric_grad(loss, x))
    if weighted:
        dst = R.targets_of(g.indptr)
        dw_ref = (r[dst].reshape(g.E, heads, c) * x[g.src].reshape(g.E, heads, c)).sum(axis=2)
        check_backward(lambda buf, acc: G.spmm_backward_w(g.indptr, g.src, x, r, buf, acc),
                       dw_ref, g.rng, numeric_grad(loss, w))


def test_spmm_fixed_graph_by_hand():
    """Target 0: edges from 1 (twice) and itself; target 1: none; target 2: from 0."""
    srcs, dsts = [1, 0, 1, 0], [0, 0, 0, 2]
    indptr, src, _ = R.csr_from_edges(srcs, dsts, 3)
    x = np.array([[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]])
    out = np.empty((3, 2))
    G.spmm_forward(indptr, src, np.empty((0, 1)), x, out, False)
    np.testing.assert_array_equal(out, [[21.0, 42.0], [0.0, 0.0], [1.0, 2.0]])
    mw = np.empty((4, 1))
    G.mean_weights(indptr, mw)
    G.spmm_forward(indptr, src, mw, x, out, True)
    np.testing.assert_allclose(out, [[7.0, 14.0], [0.0, 0.0], [1.0, 2.0]])


# ------------------------------------------------------------------------------------------------
# scatter max
# ------------------------------------------------------------------------------------------------


@FEW
@given(graphs(), st.integers(1, 4))
def test_scatter_max_forward_matches_reference(g, f):
    x64 = g.normal(g.n_src, f)
    ref_out, ref_arg = R.scatter_max(g.indptr, g.src, x64)
    for dt in DTYPES:
        out = np.full((g.n_dst, f), np.nan, dt)
        arg = np.full((g.n_dst, f), np.nan, dt)
        G.scatter_max_forward(g.indptr, g.src, x64.astype(dt), out, arg)
        np.testing.assert_allclose(out, ref_out, **TOL[dt])
        if dt is np.float64:
            np.testing.assert_array_equal(arg, ref_arg)


def test_scatter_max_ties_first_edge_wins_and_isolated():
    indptr, src, _ = R.csr_from_edges([0, 1, 2], [0, 0, 0], 2)
    x = np.array([[1.0, 5.0], [3.0, 5.0], [3.0, 4.0]])
    out = np.empty((2, 2))
    arg = np.empty((2, 2))
    G.scatter_max_forward(indptr, src, x, out, arg)
    np.testing.assert_array_equal(out, [[3.0, 5.0], [0.0, 0.0]])
    np.testing.assert_array_equal(arg, [[1.0, 0.0], [-1.0, -1.0]])


@FEW
@given(graphs(), st.integers(1, 4))
def test_scatter_max_backward_finite_differences(g, f):
    x = distinct_values(g, g.n_src, f)
    r = g.normal(g.n_dst, f)
    out = np.empty((g.n_dst, f))
    arg = np.empty((g.n_dst, f))

    def loss():
        G.scatter_max_forward(g.indptr, g.src, x, out, arg)
        return float((out * r).sum())

    fd = numeric_grad(loss, x)
    loss()
    expected = np.zeros((g.n_src, f))
    _, ref_arg = R.scatter_max(g.indptr, g.src, x)
    for i, k in zip(*np.nonzero(ref_arg >= 0)):
        expected[g.src[int(ref_arg[i, k])], k] += r[i, k]
    check_backward(lambda buf, acc: G.scatter_max_backward(arg, g.src, r, buf, acc),
                   expected, g.rng, fd)


# ------------------------------------------------------------------------------------------------
# segment softmax
# ------------------------------------------------------------------------------------------------


@FEW
@given(graphs(), st.integers(1, 3), st.sampled_from([1.0, 30.0, 1000.0]))
def test_segment_softmax_forward_matches_reference(g, heads, scale):
    scores64 = g.normal(g.E, heads) * scale    # large scores: the segment max keeps exp finite
    ref = R.segment_softmax(g.indptr, scores64)
    for dt in DTYPES:
        out = np.full((g.E, heads), np.nan, dt)
        G.segment_softmax_forward(g.indptr, scores64.astype(dt), out)
        assert np.isfinite(out).all()
        np.testing.assert_allclose(out, ref, **TOL[dt])
        # in place (out is scores)
        inplace = scores64.astype(dt)
        G.segment_softmax_forward(g.indptr, inplace, inplace)
        np.testing.assert_allclose(inplace, ref, **TOL[dt])
    sums = seg_sum(g.indptr, ref)
    has_edges = np.diff(g.indptr) > 0
    np.testing.assert_allclose(sums[has_edges], 1.0)


@FEW
@given(graphs(), st.integers(1, 3))
def test_segment_softmax_backward_finite_differences(g, heads):
    scores = g.normal(g.E, heads)
    r = g.normal(g.E, heads)
    out = np.empty((g.E, heads))

    def loss():
        G.segment_softmax_forward(g.indptr, scores, out)
        return float((out * r).sum())

    fd = numeric_grad(loss, scores)
    loss()
    dot = seg_sum(g.indptr, out * r)[R.targets_of(g.indptr)]
    expected = out * (r - dot)
    check_backward(lambda buf, acc: G.segment_softmax_backward(g.indptr, out, r, buf, acc),
                   expected, g.rng, fd)


# ------------------------------------------------------------------------------------------------
# head dot
# ------------------------------------------------------------------------------------------------


@FEW
@given(st.integers(0, 6), heads_channels, st.booleans(), st.integers(0, 2**32 - 1))
def test_head_dot_forward_and_backward(n, hc, flat_att, seed):
    heads, c = hc
    g = Graph(1, 1, [], [], seed)
    x = g.normal(n, heads * c)
    att = g.normal(heads * c) if flat_att else g.normal(1, heads * c)
    ref = R.head_dot(x, att, heads)
    for dt in DTYPES:
        out = np.full((n, heads), np.nan, dt)
        G.head_dot_forward(x.astype(dt), att.astype(dt), out)
        np.testing.assert_allclose(out, ref, **TOL[dt])
    r = g.normal(n, heads)
    out = np.empty((n, heads))

    def loss():
        G.head_dot_forward(x, att, out)
        return float((out * r).sum())

    dx_ref = np.repeat(r, c, axis=1) * att.reshape(1, -1)
    check_backward(lambda buf, acc: G.head_dot_backward_x(att, r, buf, acc), dx_ref, g.rng,
                   numeric_grad(loss, x))
    datt_ref = (np.repeat(r, c, axis=1) * x).sum(axis=0).reshape(att.shape)
    check_backward(lambda buf, acc: G.head_dot_backward_att(x, r, buf, acc), datt_ref, g.rng,
                   numeric_grad(loss, att))


@FEW
@given(st.integers(0, 6), heads_channels, st.integers(0, 2**32 - 1))
def test_head_mean_forward_and_backward(n, hc, seed):
    heads, c = hc
    g = Graph(1, 1, [], [], seed)
    x = g.normal(n, heads * c)
    ref = x.reshape(n, heads, c).mean(axis=1)
    for dt in DTYPES:
        out = np.full((n, c), np.nan, dt)
        G.head_mean_forward(x.astype(dt), out)
        np.testing.assert_allclose(out, ref, **TOL[dt])
    r = g.normal(n, c)
    out = np.empty((n, c))

    def loss():
        G.head_mean_forward(x, out)
        return float((out * r).sum())

    check_backward(lambda buf, acc: G.head_mean_backward(r, buf, acc),
                   np.tile(r, heads) / heads, g.rng, numeric_grad(loss, x))


# ------------------------------------------------------------------------------------------------
# edge gather-add
# ------------------------------------------------------------------------------------------------


@FEW
@given(graphs(), st.integers(1, 3), st.booleans(), st.booleans())
def test_edge_gather_add(g, heads, need_src, need_dst):
    a_src = g.normal(g.n_src, heads)
    a_dst = g.normal(g.n_dst, heads)
    ref = R.edge_gather_add(g.indptr, g.src, a_src, a_dst)
    for dt in DTYPES:
        out = np.full((g.E, heads), np.nan, dt)
        G.edge_gather_add_forward(g.indptr, g.src, a_src.astype(dt), a_dst.astype(dt), out)
        np.testing.assert_allclose(out, ref, **TOL[dt])
    r = g.normal(g.E, heads)
    out = np.empty((g.E, heads))

    def loss():
        G.edge_gather_add_forward(g.indptr, g.src, a_src, a_dst, out)
        return float((out * r).sum())

    fd_src = numeric_grad(loss, a_src)
    fd_dst = numeric_grad(loss, a_dst)
    ref_src = np.zeros((g.n_src, heads))
    np.add.at(ref_src, g.src, r)
    ref_dst = seg_sum(g.indptr, r)
    dummy = np.full((1, 1), 7.0)
    if need_src:
        check_backward(lambda buf, acc: G.edge_gather_add_backward(
            g.indptr, g.src, r, buf, dummy, acc, False, True, False),
            ref_src, g.rng, fd_src)
    if need_dst:
        check_backward(lambda buf, acc: G.edge_gather_add_backward(
            g.indptr, g.src, r, dummy, buf, False, acc, False, True),
            ref_dst, g.rng, fd_dst)
    assert dummy[0, 0] == 7.0                   # an array that is not needed is not touched
    # both at once, mixed accumulate flags
    ds = np.full_like(a_src, 1e3)
    base = g.normal(g.n_dst, heads)
    dd = base.copy()
    G.edge_gather_add_backward(g.indptr, g.src, r, ds, dd, False, True, True, True)
    np.testing.assert_allclose(ds, fd_src, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dd, base + fd_dst, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------------------------------------
# sparse features times dense weights
# ------------------------------------------------------------------------------------------------


@FEW
@given(st.integers(0, 6), st.integers(1, 7), st.integers(1, 4), st.floats(0.0, 1.0),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_csr_dense(n, f, o, density, has_bias, seed):
    g = Graph(1, 1, [], [], seed)
    xs = sp.random(n, f, density=density, format="csr", random_state=seed % 2**31,
                   data_rvs=g.rng.standard_normal)
    xs.sort_indices()
    ip, ix = xs.indptr.astype(np.int64), xs.indices.astype(np.int64)
    w = g.normal(o, f)
    b = g.normal(o)
    ref = R.csr_dense(xs.toarray(), w, b if has_bias else None)
    for dt in DTYPES:
        out = np.full((n, o), np.nan, dt)
        scratch = np.full((f, o), np.nan, dt)
        G.csr_dense_forward(ip, ix, xs.data.astype(dt), w.astype(dt), scratch, b.astype(dt),
                            out, has_bias)
        np.testing.assert_allclose(out, ref, **TOL[dt])
    r = g.normal(n, o)
    out = np.empty((n, o))
    scratch = np.full((f, o), np.nan)

    def loss():
        G.csr_dense_forward(ip, ix, xs.data, w, scratch, b, out, has_bias)
        return float((out * r).sum())

    dw_ref = r.T @ xs.toarray()
    fd = numeric_grad(loss, w)
    check_backward(lambda buf, acc: G.csr_dense_backward_w(ip, ix, xs.data, r, buf, scratch,
                                                           acc), dw_ref, g.rng, fd)
    if has_bias:
        db = np.empty(o)
        dense_backward_bias(r, db, False)
        np.testing.assert_allclose(db, numeric_grad(loss, b), rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------------------------------------
# edge weights
# ------------------------------------------------------------------------------------------------


@FEW
@given(graphs(square=True))
def test_gcn_norm_weights_equals_data_graph_gcn_norm(g):
    ei = np.stack([g.src, R.targets_of(g.indptr)])
    ei_loops, weights = gcn_norm(ei, g.n_src)              # drops loops, appends one per node
    indptr, src, edge_ids = to_csr(ei_loops, g.n_src)
    for dt in DTYPES:
        out = np.full((src.shape[0], 1), np.nan, dt)
        G.gcn_norm_weights(indptr, src, out)
        np.testing.assert_allclose(out[:, 0], weights[edge_ids], rtol=1e-6)
        np.testing.assert_allclose(out, R.gcn_norm(indptr, src), **TOL[dt])


@FEW
@given(graphs(square=True))
def test_gcn_norm_and_mean_weights_without_loops(g):
    """Without self loops a source may have in-degree 0: weight 0 (PyG replaces inf by 0)."""
    out = np.full((g.E, 1), np.nan)
    G.gcn_norm_weights(g.indptr, g.src, out)
    np.testing.assert_allclose(out, R.gcn_norm(g.indptr, g.src), rtol=1e-12)
    for dt in DTYPES:
        out = np.full((g.E, 1), np.nan, dt)
        G.mean_weights(g.indptr, out)
        np.testing.assert_allclose(out, R.mean(g.indptr), **TOL[dt])


# ------------------------------------------------------------------------------------------------
# zero sizes, allocations, parallel build
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
def test_zero_nodes_and_zero_edges(dt):
    for n in (0, 3):
        indptr = np.zeros(n + 1, np.int64)
        src = np.zeros(0, np.int64)
        x = np.ones((n, 4), dt)
        out = np.full((n, 4), np.nan, dt)
        arg = np.full((n, 4), np.nan, dt)
        e2 = np.zeros((0, 2), dt)
        G.spmm_forward(indptr, src, e2, x, out, True)
        assert (out == 0).all()
        G.spmm_forward(indptr, src, e2, x, out, False)
        assert (out == 0).all()
        G.scatter_max_forward(indptr, src, x, out, arg)
        assert (out == 0).all() and (arg == -1).all()
        dx = np.full((n, 4), 5.0, dt)
        G.spmm_backward_x(indptr, src, e2, out, dx, True, False)
        assert (dx == 0).all()
        G.scatter_max_backward(arg, src, out, dx, True)
        assert (dx == 0).all()
        G.spmm_backward_w(indptr, src, x, out, e2, False)
        G.segment_softmax_forward(indptr, e2, e2)
        G.segment_softmax_backward(indptr, e2, e2, e2, False)
        G.edge_gather_add_forward(indptr, src, x[:, :2], x[:, :2], e2)
        da = np.full((n, 2), 5.0, dt)
        G.edge_gather_add_backward(indptr, src, e2, da, da, False, True, True, True)
        assert (da == 0).all()
        G.gcn_norm_weights(indptr, src, e2[:, :1])
        G.mean_weights(indptr, e2[:, :1])


@jit
def _gat_like_step(k, indptr, src, x, att, a_src, a_dst, logits, alpha, out, dx, dlogits):
    """The kernels of one GAT-like layer, forward and backward, k times (allocation probe)."""
    for _ in range(k):
        G.head_dot_forward(x, att, a_src)
        G.head_dot_forward(x, att, a_dst)
        G.edge_gather_add_forward(indptr, src, a_src, a_dst, logits)
        G.segment_softmax_forward(indptr, logits, alpha)
        G.spmm_forward(indptr, src, alpha, x, out, True)
        G.spmm_backward_x(indptr, src, alpha, out, dx, True, False)
        G.spmm_backward_w(indptr, src, x, out, alpha, False)
        G.segment_softmax_backward(indptr, alpha, alpha, dlogits, False)
        G.edge_gather_add_backward(indptr, src, dlogits, a_src, a_dst, False, False, True, True)
        G.head_dot_backward_x(att, a_src, dx, True)
        G.head_dot_backward_att(x, a_src, att, True)


@needs_jit
def test_no_allocations_in_the_kernels():
    g = Graph(6, 6, [0, 1, 2, 3, 4, 5, 0, 2], [1, 2, 3, 4, 5, 0, 0, 0], 0)
    heads, c = 2, 3
    args = (g.indptr, g.src, g.normal(6, heads * c), g.normal(heads * c),
            np.empty((6, heads)), np.empty((6, heads)), np.empty((g.E, heads)),
            np.empty((g.E, heads)), np.empty((6, heads * c)), np.empty((6, heads * c)),
            np.empty((g.E, heads)))
    _gat_like_step(1, *args)
    counts = count_allocations(lambda k: _gat_like_step(k, *args))
    assert counts[0] == counts[1], counts


# ------------------------------------------------------------------------------------------------
# PyTorch Geometric (optional)
# ------------------------------------------------------------------------------------------------


@settings(max_examples=10, deadline=None)
@given(graphs(), st.integers(1, 3))
def test_against_pyg_softmax_and_scatter(g, heads):
    torch = pytest.importorskip("torch")
    pyg_utils = pytest.importorskip("torch_geometric.utils")
    index = torch.from_numpy(R.targets_of(g.indptr))
    scores = g.normal(g.E, heads)
    out = np.empty_like(scores)
    G.segment_softmax_forward(g.indptr, scores, out)
    ref = pyg_utils.softmax(torch.from_numpy(scores), index, num_nodes=g.n_dst)
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-10, atol=1e-12)

    x = g.normal(g.n_src, heads * 2)
    msg = torch.from_numpy(x)[torch.from_numpy(g.src)]
    for reduce in ("sum", "mean", "max"):
        got = np.empty((g.n_dst, heads * 2))
        if reduce == "max":
            G.scatter_max_forward(g.indptr, g.src, x, got, np.empty_like(got))
        elif reduce == "mean":
            mw = np.empty((g.E, 1))
            G.mean_weights(g.indptr, mw)
            G.spmm_forward(g.indptr, g.src, mw, x, got, True)
        else:
            G.spmm_forward(g.indptr, g.src, np.empty((0, 1)), x, got, False)
        ref = pyg_utils.scatter(msg, index, dim=0, dim_size=g.n_dst, reduce=reduce)
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-10, atol=1e-12, err_msg=reduce)
