"""Graph: validation messages, Cora, CSR grouping by target, GCN normalisation."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from nnjit.data.graph import Graph, count_duplicate_edges, gcn_norm, to_csr

N = 5
X = np.arange(N * 3, dtype=np.float32).reshape(N, 3)
EI = np.array([[0, 1, 1, 2, 3], [1, 0, 2, 1, 4]])
Y = np.array([0, 1, 2, 1, 0])


def _mask(*idx, n=N):
    m = np.zeros(n, bool)
    m[list(idx)] = True
    return m


# ---- validation ------------------------------------------------------------------------------

BAD = [
    # (kwargs overriding the good ones, exception, regex the message must match)
    ({"edge_index": np.array([0, 1, 2])}, ValueError,
     r"Expected 'edge_index' to be two-dimensional with shape \(2, E\) \(got shape \(3,\)\)"),
    ({"edge_index": np.zeros((3, 4), int)}, ValueError,
     r"Expected 'edge_index' to be two-dimensional with shape \(2, E\) \(got shape \(3, 4\)\)"),
    ({"edge_index": EI.T}, ValueError, r"got shape \(5, 2\)\)\. .*transpose `edge_index\.T`"),
    ({"edge_index": EI.astype(np.float64)}, TypeError,
     r"Expected 'edge_index' to hold integer node indices \(got dtype float64\)\..*astype"),
    ({"edge_index": np.array([[0, -1], [1, 2]])}, ValueError,
     r"Found negative indices in 'edge_index' \(got -1, in 1 entries\)"),
    ({"edge_index": np.array([[0, 7], [1, 2]])}, ValueError,
     (r"Found indices in 'edge_index' that are larger than 4 \(got 7\)\. Please ensure the node "
     r"features have as many rows as the largest index \+ 1 \(8\); they have 5")),
    ({"edge_index": np.array([[0, 2**63 - 1], [1, 2]], np.uint64)}, ValueError,
     r"larger than 4 \(got 9223372036854775807\)"),
    ({"edge_index": sp.eye(3, format="csr")}, TypeError, r"got a scipy sparse matrix"),
    ({"x": np.zeros(N, np.float32)}, ValueError,
     r"Expected 'x' to be two-dimensional with shape \(N, F\) \(got shape \(5,\)\)"),
    ({"x": np.zeros((N, 2), complex)}, TypeError, r"'x' to hold real numbers.*complex128"),
    ({"x": np.where(np.eye(N, 3) > 0, np.nan, X)}, ValueError,
     r"Found 3 non-finite values \(NaN or inf\) in 'x'"),
    ({"x": np.full((N, 2), 1e300)}, ValueError, r"Found 10 non-finite values"),
    ({"x": sp.csr_matrix(np.where(np.eye(N, 3) > 0, np.inf, 0.0))}, ValueError,
     r"Found 3 non-finite values \(NaN or inf\) in 'x'"),
    ({"y": Y[:4]}, ValueError,
     r"Expected 'y' to hold one label per node, shape \(5,\) \(got shape \(4,\)\)"),
    ({"y": Y[:, None]}, ValueError, r"got shape \(5, 1\)\)\. Use `y\.ravel\(\)`"),
    ({"y": Y.astype(np.float32)}, TypeError,
     r"Expected 'y' to hold integer class labels 0\.\.C-1 \(got dtype float32\)"),
    ({"y": np.array([0, -1, 2, -1, 0])}, ValueError,
     r"Found negative labels in 'y' \(got -1, at 2 nodes\)"),
    ({"train_mask": np.array([0, 1, 2])}, TypeError,
     r"Expected 'train_mask' to be a boolean mask of shape \(5,\) \(got dtype int64\)\..*m\[idx\]"),
    ({"val_mask": np.ones(4, bool)}, ValueError,
     r"Expected 'val_mask' to have one entry per node, shape \(5,\) \(got shape \(4,\)\)"),
    ({"train_mask": _mask(0, 1, 2), "val_mask": _mask(3), "test_mask": _mask(1, 2, 4)}, ValueError,
     r"Masks 'train_mask' and 'test_mask' overlap on 2 nodes"),
    ({"val_mask": _mask(3), "test_mask": _mask(3)}, ValueError,
     r"Masks 'val_mask' and 'test_mask' overlap on 1 nodes"),
    ({"self_loops": "drop"}, ValueError,
     r"Expected 'self_loops' to be one of \('keep', 'remove', 'error'\) \(got 'drop'\)"),
    ({"duplicates": True}, ValueError, r"Expected 'duplicates' to be one of"),
]


@pytest.mark.parametrize("override, exc, match", BAD)
def test_bad_input_raises_naming_argument(override, exc, match):
    kwargs = {"x": X, "edge_index": EI, "y": Y, "train_mask": _mask(0), "val_mask": _mask(1),
                  "test_mask": _mask(2)}
    kwargs.update(override)
    with pytest.raises(exc, match=match):
        Graph.from_arrays(**kwargs)


def test_good_input_is_stored_with_documented_dtypes():
    g = Graph.from_arrays(X.astype(np.float64), EI.astype(np.int32), Y.astype(np.uint8),
                          _mask(0, 1), _mask(2), None)
    assert g.x.dtype == np.float32 and g.x.flags.c_contiguous and g.x.flags.writeable
    assert g.edge_index.dtype == np.int64 and g.edge_index.shape == (2, 5)
    assert g.y.dtype == np.int64 and g.test_mask is None
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (5, 5, 3, 3)
    assert repr(g) == ("Graph(num_nodes=5, num_edges=5, num_features=3 (dense), num_classes=3, "
                       "train/val/test=2/1/-)")
    # already the right dtype and layout: stored as is
    h = Graph.from_arrays(X, EI.astype(np.int64))
    assert h.x is X and h.y is None and h.num_classes == 0


def test_empty_edge_index_is_allowed():
    g = Graph.from_arrays(X, np.zeros((2, 0), np.int64))
    assert g.num_edges == 0 and g.num_self_loops == 0 and g.num_duplicate_edges == 0


def test_sparse_features_become_float32_csr():
    dense = (np.random.default_rng(0).random((N, 8)) < 0.3).astype(np.int64)
    coo = sp.coo_matrix(dense)
    g = Graph.from_arrays(coo, EI, Y)
    assert g.is_sparse and g.x.format == "csr" and g.x.dtype == np.float32
    assert g.num_features == 8 and "(csr)" in repr(g)
    np.testing.assert_array_equal(g.x.toarray(), dense)


LOOPY = np.array([[0, 1, 1, 0, 2, 3, 0, 1],
                  [1, 1, 0, 1, 2, 4, 1, 1]])      # loops: 1->1 (x2), 2->2; dups: 0->1 (x3), 1->1


def test_self_loops_and_duplicates_kept_by_default_and_reported():
    g = Graph.from_arrays(X, LOOPY)
    np.testing.assert_array_equal(g.edge_index, LOOPY)
    assert g.num_self_loops == 3 and g.num_duplicate_edges == 3


def test_self_loops_remove_and_error():
    g = Graph.from_arrays(X, LOOPY, self_loops="remove")
    np.testing.assert_array_equal(g.edge_index, [[0, 1, 0, 3, 0], [1, 0, 1, 4, 1]])
    assert g.num_self_loops == 0 and g.num_duplicate_edges == 2
    with pytest.raises(ValueError, match=re.escape(
            "Found 3 self loops in 'edge_index' (e.g. edge 1: 1 -> 1). Pass self_loops='remove'")):
        Graph.from_arrays(X, LOOPY, self_loops="error")


def test_duplicates_remove_keeps_first_occurrence_in_order():
    g = Graph.from_arrays(X, LOOPY, duplicates="remove")
    np.testing.assert_array_equal(g.edge_index, [[0, 1, 1, 2, 3], [1, 1, 0, 2, 4]])
    assert g.num_duplicate_edges == 0
    both = Graph.from_arrays(X, LOOPY, self_loops="remove", duplicates="remove")
    np.testing.assert_array_equal(both.edge_index, [[0, 1, 3], [1, 0, 4]])


def test_duplicates_error_lists_count():
    with pytest.raises(ValueError, match=re.escape(
            "Found 3 duplicate edges in 'edge_index' (edges repeating an earlier (source, target) "
            "pair, e.g. edge 3: 0 -> 1). Pass duplicates='remove'")):
        Graph.from_arrays(X, LOOPY, duplicates="error")
    # loops are handled first: only the 0->1 copies remain duplicates
    with pytest.raises(ValueError, match="Found 2 duplicate edges"):
        Graph.from_arrays(X, LOOPY, self_loops="remove", duplicates="error")


# ---- Cora ------------------------------------------------------------------------------------

def test_cora_loads_with_standard_numbers():
    from nnjit.datasets import load_cora

    g = Graph.from_dataset(load_cora(), self_loops="error", duplicates="error")
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (2708, 10556, 1433, 7)
    assert [int(m.sum()) for m in (g.train_mask, g.val_mask, g.test_mask)] == [140, 500, 1000]
    ei, w = gcn_norm(g.edge_index, g.num_nodes)
    assert ei.shape == (2, 10556 + 2708) and w.dtype == np.float32 and np.isfinite(w).all()
    indptr, _, _ = to_csr(g.edge_index, g.num_nodes)
    # undirected: in-degree equals out-degree
    np.testing.assert_array_equal(np.diff(indptr), np.bincount(g.edge_index[0], minlength=2708))


# ---- to_csr / gcn_norm -----------------------------------------------------------------------

@st.composite
def graphs(draw, max_nodes=8, max_edges=20):
    n = draw(st.integers(1, max_nodes))
    e = draw(st.integers(0, max_edges))
    flat = draw(st.lists(st.integers(0, n - 1), min_size=2 * e, max_size=2 * e))
    return np.array(flat, dtype=np.int64).reshape(2, e), n


@given(graphs())
def test_to_csr_round_trip(graph):
    ei, n = graph
    indptr, indices, edge_ids = to_csr(ei, n)
    assert indptr.dtype == indices.dtype == edge_ids.dtype == np.int64
    assert indptr.shape == (n + 1,) and indptr[0] == 0 and indptr[-1] == ei.shape[1]
    targets = np.repeat(np.arange(n), np.diff(indptr))
    rebuilt = np.stack([indices, targets])
    expected = ei[:, np.argsort(ei[1], kind="stable")]          # by target, stable
    np.testing.assert_array_equal(rebuilt, expected)
    np.testing.assert_array_equal(ei[:, edge_ids], rebuilt)
    np.testing.assert_array_equal(np.sort(edge_ids), np.arange(ei.shape[1]))


def test_to_csr_and_gcn_norm_validate_edge_index():
    with pytest.raises(ValueError, match=r"larger than 2 \(got 3\)"):
        to_csr(np.array([[0], [3]]), 3)
    with pytest.raises(ValueError, match=r"two-dimensional with shape \(2, E\)"):
        gcn_norm(np.array([0, 1]), 3)
    with pytest.raises(TypeError, match=r"'num_nodes' to be an int \(got float\)"):
        to_csr(np.array([[0], [1]]), 3.0)


def _dense_gcn(ei, n, add_self_loops):
    a = np.zeros((n, n))
    np.add.at(a, (ei[1], ei[0]), 1.0)           # a[target, source]
    if add_self_loops:
        np.fill_diagonal(a, 1.0)                # PyG: existing loops replaced by one per node
    deg = a.sum(axis=1)
    with np.errstate(divide="ignore"):
        dis = np.where(deg > 0, deg ** -0.5, 0.0)
    return dis[:, None] * a * dis[None, :]


@pytest.mark.parametrize("add_self_loops", [True, False])
@given(graph=graphs())
def test_gcn_norm_equals_dense_reference(graph, add_self_loops):
    ei, n = graph
    out_ei, w = gcn_norm(ei, n, add_self_loops=add_self_loops)
    assert out_ei.dtype == np.int64 and w.dtype == np.float32 and w.shape == (out_ei.shape[1],)
    got = np.zeros((n, n))
    np.add.at(got, (out_ei[1], out_ei[0]), w.astype(np.float64))
    np.testing.assert_allclose(got, _dense_gcn(ei, n, add_self_loops), rtol=1e-6, atol=1e-7)
    if add_self_loops:
        np.testing.assert_array_equal(out_ei[:, -n:], np.stack([np.arange(n)] * 2))
        assert count_duplicate_edges(out_ei[:, -n:], n) == 0
    else:
        np.testing.assert_array_equal(out_ei, ei)


def test_gcn_norm_matches_pyg():
    torch = pytest.importorskip("torch")
    pyg_gcn = pytest.importorskip("torch_geometric.nn.conv.gcn_conv")
    rng = np.random.default_rng(0)
    n = 30
    ei = rng.integers(0, n, size=(2, 120))
    ours_ei, ours_w = gcn_norm(ei, n)
    ref_ei, ref_w = pyg_gcn.gcn_norm(torch.as_tensor(ei), None, n, add_self_loops=True)
    np.testing.assert_array_equal(ours_ei, ref_ei.numpy())
    np.testing.assert_allclose(ours_w, ref_w.numpy(), rtol=1e-6)


def test_load_graph_npz_round_trip_and_errors(tmp_path):
    """Any npz with Cora's layout loads as a GraphDataset and validates into a Graph; a missing
    array is named."""
    import nnjit as nn

    cora = nn.datasets.load_cora()
    path = tmp_path / "mine.npz"
    np.savez(path, x=cora.x[:50], y=cora.y[:50], edge_index=np.array([[0, 1, 2], [1, 2, 0]]),
             train_mask=np.arange(50) < 10, val_mask=(np.arange(50) >= 10) & (np.arange(50) < 20),
             test_mask=np.arange(50) >= 20)
    ds = nn.datasets.load_graph_npz(path)
    graph = Graph.from_dataset(ds)
    assert (ds.name, graph.num_nodes, graph.num_edges) == ("mine", 50, 3)
    np.savez(tmp_path / "bad.npz", x=cora.x[:5], y=cora.y[:5])
    with pytest.raises(ValueError, match=r"bad.npz lacks edge_index, train_mask, val_mask"):
        nn.datasets.load_graph_npz(tmp_path / "bad.npz")
    with pytest.raises(FileNotFoundError, match="no such file"):
        nn.datasets.load_graph_npz(tmp_path / "none.npz")
