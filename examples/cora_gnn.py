"""GCN, GraphSAGE and GAT on Cora (PyG's reference settings), full batch, and GraphSAGE with
neighbour sampling: test accuracy and time per epoch of each.

    python examples/cora_gnn.py
"""

import time

import numpy as np
import scipy.sparse as sp

import nnjit as nn
from nnjit.nn import functional as F

cora = nn.datasets.load_cora()
x = cora.x / np.maximum(cora.x.sum(axis=1, keepdims=True), 1)  # PyG's NormalizeFeatures
graph = nn.Graph.from_arrays(sp.csr_matrix(x), cora.edge_index, cora.y, cora.train_mask,
                             cora.val_mask, cora.test_mask)
dense_graph = nn.Graph.from_arrays(x, cora.edge_index, cora.y, cora.train_mask, cora.val_mask,
                                   cora.test_mask)


class TwoLayers(nn.Module):
    """dropout -> conv -> activation -> dropout -> conv, as PyG's examples."""

    def __init__(self, conv1, conv2, p, activation=F.relu):
        super().__init__()
        self.conv1, self.conv2, self.drop = conv1, conv2, nn.Dropout(p)
        self.activation = activation

    def forward(self, x, edges):
        x = self.activation(self.conv1(self.drop(x), edges))
        return self.conv2(self.drop(x), edges)


models = {
    "GCN": (lambda: TwoLayers(nn.GCNConv(1433, 16), nn.GCNConv(16, 7), 0.5), 0.01),
    "GraphSAGE": (lambda: TwoLayers(nn.SAGEConv(1433, 64), nn.SAGEConv(64, 7), 0.5), 0.01),
    "GAT": (lambda: TwoLayers(nn.GATConv(1433, 8, heads=8, dropout=0.6),
                              nn.GATConv(64, 7, concat=False, dropout=0.6), 0.6, F.elu), 0.005),
}
for name, (build, lr) in models.items():
    nn.set_seed(0)
    trainer = nn.Trainer(build(), nn.Adam(lr=lr, weight_decay=5e-4), seed=0)
    trainer.fit(graph, epochs=1, verbose=0)  # compiles the graph build once (cached on disk)
    start = time.perf_counter()
    trainer.fit(graph, epochs=200, n_iter_no_change=None, monitor="val_accuracy", verbose=0)
    per_epoch = (time.perf_counter() - start) / 200
    accuracy = trainer.evaluate(graph, "test")["accuracy"]
    print(f"{name}: test accuracy {accuracy:.3f}, {per_epoch * 1e3:.2f} ms/epoch")

nn.set_seed(0)
sage = TwoLayers(nn.SAGEConv(1433, 64), nn.SAGEConv(64, 7), 0.5)
trainer = nn.Trainer(sage, nn.Adam(lr=0.01, weight_decay=5e-4), seed=0)
trainer.fit(nn.NeighborLoader(dense_graph, [10, 10], batch_size=64), epochs=30,
            n_iter_no_change=None, monitor="val_accuracy", verbose=0)
accuracy = trainer.evaluate(dense_graph, "test")["accuracy"]
print(f"GraphSAGE, neighbour-sampled: test accuracy {accuracy:.3f}")
