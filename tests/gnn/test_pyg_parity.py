"""Graph layers equal PyTorch Geometric's on the same weights (the ``pyg`` extra)."""

from __future__ import annotations

import numpy as np
import pytest

import nnjit as nn
from tests.gnn.graphs import KINDS, OneLayer, make_layer, randomize

torch = pytest.importorskip("torch", reason="the parity extra (torch) is not installed")
pyg = pytest.importorskip("torch_geometric", reason="the pyg extra is not installed")


@pytest.mark.parametrize("kind", KINDS)
def test_layer_output_equals_pyg(kind):
    from torch_geometric import nn as pnn

    rng = np.random.default_rng(1)
    n, f_in, f_out = 30, 6, 4
    edge_index = rng.integers(0, n, (2, 90))
    graph = nn.Graph.from_arrays(rng.normal(size=(n, f_in)), edge_index, rng.integers(0, 3, n))
    layer = make_layer(kind, f_in, f_out)
    model = OneLayer(layer)
    trainer = nn.Trainer(model, dtype=np.float64, seed=0)
    trainer.gradients(graph)
    randomize(model, 3)
    if kind == "gcn":
        theirs = pnn.GCNConv(f_in, f_out)
    elif kind.startswith("sage"):
        theirs = pnn.SAGEConv(f_in, f_out, aggr=kind.split("_")[1])
    else:
        theirs = pnn.GATConv(f_in, f_out, heads=2, concat=kind == "gat_concat")
    mine = layer.state_dict()
    theirs = theirs.double()
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            p.copy_(torch.from_numpy(mine[name].reshape(tuple(p.shape))))
        expected = theirs(torch.from_numpy(graph.x.astype(np.float64)),
                                   torch.from_numpy(edge_index)).numpy()
    np.testing.assert_allclose(trainer.predict_outputs(graph), expected, rtol=1e-9, atol=1e-10)
