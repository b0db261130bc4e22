"""Graph layers: NumPy references and finite-difference gradients through the interpreter
(PyG parity: test_pyg_parity.py)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnjit as nn
from nnjit.nn import functional as F
from tests.gnn.graphs import (
    KINDS,
    OneLayer,
    gat_reference,
    gcn_reference,
    make_layer,
    randomize,
    sage_reference,
    small_graphs,
)
from tests.helpers import finite_difference_gradients

SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


class TwoLayers(nn.Module):
    """layer -> tanh -> layer2: gradients flow through every graph op of the first layer."""

    def __init__(self, layer, layer2):
        super().__init__()
        self.conv = layer
        self.conv2 = layer2

    def forward(self, x, edges):
        return self.conv2(F.tanh(self.conv(x, edges)), edges)


def reference(kind, layer, x, edge_index):
    p = {k: v.astype(np.float64) for k, v in layer.state_dict().items()}
    if kind == "gcn":
        return gcn_reference(x, edge_index, p["lin.weight"], p["bias"])
    if kind.startswith("sage"):
        return sage_reference(x, edge_index, p["lin_l.weight"], p["lin_l.bias"],
                              p["lin_r.weight"], kind.split("_")[1])
    return gat_reference(x, edge_index, p["lin.weight"], p["att_src"], p["att_dst"], p["bias"],
                         layer.heads, layer.concat)


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=small_graphs(), f_out=st.integers(2, 3), seed=st.integers(0, 1000))
def test_layer_output_equals_numpy_reference(kind, data, f_out, seed):
    graph, classes = data
    layer = make_layer(kind, graph.num_features, max(f_out, classes))
    model = OneLayer(layer)
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), dtype=np.float64, seed=0)
    trainer.gradients(graph)  # compile
    randomize(model, seed)
    out = trainer.predict_outputs(graph)
    expected = reference(kind, layer, graph.x.astype(np.float64), graph.edge_index)
    np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=small_graphs(max_nodes=5, max_edges=10), seed=st.integers(0, 1000))
def test_layer_gradients_match_finite_differences(kind, data, seed):
    graph, classes = data
    f = graph.num_features
    model = TwoLayers(make_layer(kind, f, 3), make_layer(kind, 3 * (2 if kind == "gat_concat"
                                                                    else 1), classes, heads=1))
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), dtype=np.float64, seed=0)
    trainer.gradients(graph)
    randomize(model, seed)
    grads = trainer.gradients(graph)
    numeric = finite_difference_gradients(trainer, model, graph, None)
    for name in grads:
        np.testing.assert_allclose(grads[name], numeric[name], rtol=1e-5, atol=1e-7,
                                   err_msg=f"{kind}: gradient of {name}")


@SETTINGS
@given(data=small_graphs(max_nodes=6, max_edges=12, features=5), seed=st.integers(0, 1000))
def test_sparse_features_equal_dense_features(data, seed):
    """CSR features (with dropout on the non-zeros off) give the dense model's outputs and
    gradients."""
    graph, classes = data
    x = graph.x.copy()
    x[np.abs(x) < 0.8] = 0.0
    dense = nn.Graph.from_arrays(x, graph.edge_index, graph.y)
    sparse = nn.Graph.from_arrays(sp.csr_matrix(x), graph.edge_index, graph.y)
    results = []
    for g in (dense, sparse):
        nn.set_seed(seed)
        model = TwoLayers(nn.GCNConv(5, 4), nn.SAGEConv(4, classes))
        trainer = nn.Trainer(model, nn.SGD(lr=0.1), dtype=np.float64, seed=0)
        results.append((trainer.gradients(g), trainer.predict_outputs(g)))
    (g_dense, out_dense), (g_sparse, out_sparse) = results
    np.testing.assert_allclose(out_sparse, out_dense, rtol=1e-10, atol=1e-12)
    for name in g_dense:
        np.testing.assert_allclose(g_sparse[name], g_dense[name], rtol=1e-9, atol=1e-12)


def test_loss_and_accuracy_count_only_the_mask():
    """The masked loss equals cross-entropy over the mask's nodes only."""
    rng = np.random.default_rng(0)
    n = 12
    graph = nn.Graph.from_arrays(rng.normal(size=(n, 3)), rng.integers(0, n, (2, 30)),
                                 rng.integers(0, 3, n), train_mask=np.arange(n) < 5,
                                 val_mask=(np.arange(n) >= 5) & (np.arange(n) < 9))
    model = OneLayer(nn.GCNConv(3, 3))
    trainer = nn.Trainer(model, nn.SGD(lr=0.1), dtype=np.float64, seed=0)
    trainer.gradients(graph)
    logits = trainer.predict_outputs(graph)
    for mask_name in ("train", "val"):
        mask = getattr(graph, f"{mask_name}_mask")
        z = logits[mask] - logits[mask].max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        expected = -logp[np.arange(mask.sum()), graph.y[mask]].mean()
        result = trainer.evaluate(graph, mask_name)
        assert result["loss"] == pytest.approx(expected, rel=1e-12)
        assert result["accuracy"] == pytest.approx(
            (logits[mask].argmax(1) == graph.y[mask]).mean())


def test_bad_graph_inputs_raise_clearly():
    graph = nn.Graph.from_arrays(np.zeros((4, 3)), [[0, 1], [1, 2]], [0, 1, 0, 1])
    trainer = nn.Trainer(OneLayer(nn.GCNConv(5, 2)), seed=0)
    with pytest.raises(ValueError, match="GCNConv 'conv': expected node features with 5 columns"):
        trainer.fit(graph, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="unknown mask 'tset'"):
        nn.FullBatch(graph, "tset")
    with pytest.raises(ValueError, match="SAGEConv: unknown aggr 'median'"):
        nn.SAGEConv(3, 2, aggr="median")
    with pytest.raises(ValueError, match="GATConv: dropout must be in"):
        nn.GATConv(3, 2, dropout=1.5)


def test_evaluate_a_graph_without_a_mask_counts_every_node():
    rng = np.random.default_rng(1)
    n = 10
    graph = nn.Graph.from_arrays(rng.normal(size=(n, 3)), rng.integers(0, n, (2, 20)),
                                 rng.integers(0, 2, n), train_mask=np.arange(n) < 3)
    trainer = nn.Trainer(OneLayer(nn.GCNConv(3, 2)), dtype=np.float64, seed=0)
    trainer.fit(graph, epochs=1, verbose=0)
    everything = trainer.evaluate(graph)
    assert everything == trainer.evaluate(graph, np.ones(n, bool))
    assert everything != trainer.evaluate(graph, "train")


def test_graph_data_in_the_wrong_place_raises_clearly(tmp_path):
    rng = np.random.default_rng(0)
    n = 12
    args = (rng.integers(0, n, (2, 30)), rng.integers(0, 3, n))
    masks = dict(train_mask=np.arange(n) < 6, val_mask=np.arange(n) >= 6)
    graph = nn.Graph.from_arrays(rng.normal(size=(n, 3)), *args, **masks)
    other = nn.Graph.from_arrays(rng.normal(size=(n, 3)), *args, **masks)
    sparse = nn.Graph.from_arrays(sp.csr_matrix(rng.normal(size=(n, 3))), *args, **masks)
    trainer = nn.Trainer(OneLayer(nn.GCNConv(3, 3)), seed=0)
    with pytest.raises(ValueError, match="for a graph, pass val=FullBatch"):
        trainer.fit(graph, epochs=1, val=(np.zeros((2, 3)), [0, 1]), verbose=0)
    with pytest.raises(ValueError, match="the validation mask must be on the training graph"):
        trainer.fit(graph, epochs=1, val=nn.FullBatch(other, "val"), verbose=0)
    with pytest.raises(ValueError, match="graph validation data needs graph training data"):
        trainer.fit((np.zeros((4, 3)), [0, 1, 2, 0]), epochs=1, val=graph, verbose=0)
    with pytest.raises(ValueError, match="needs CrossEntropyLoss"):
        nn.Trainer(OneLayer(nn.GCNConv(3, 3)), loss="mse", seed=0).fit(graph, epochs=1,
                                                                      verbose=0)
    with pytest.raises(ValueError, match="sampled batches need dense features"):
        nn.NeighborLoader(sparse, [2])
    with pytest.raises(ValueError, match="aggr='max' needs dense features"):
        nn.Trainer(OneLayer(nn.SAGEConv(3, 3, aggr="max")), seed=0).fit(sparse, epochs=1,
                                                                       verbose=0)
    (tmp_path / "not.npz").write_text("not an archive")
    with pytest.raises(ValueError, match="not.npz is not a readable .npz archive"):
        nn.datasets.load_graph_npz(tmp_path / "not.npz")
