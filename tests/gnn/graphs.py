"""Hypothesis strategies, NumPy references and small models for the graph layer tests."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import nnjit as nn


@st.composite
def small_graphs(draw, max_nodes=7, max_edges=16, features=None, classes=None):
    """A validated random Graph (self loops and duplicate edges allowed, isolated nodes likely),
    float64 features, labels in [0, classes)."""
    n = draw(st.integers(2, max_nodes))
    e = draw(st.integers(0, max_edges))
    f = features or draw(st.integers(1, 4))
    c = classes or draw(st.integers(2, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    edge_index = rng.integers(0, n, (2, e))
    x = rng.normal(size=(n, f))
    y = rng.integers(0, c, n)
    return nn.Graph.from_arrays(x, edge_index, y), c


def with_loops(edge_index: np.ndarray, n: int) -> np.ndarray:
    """Edges without self loops, plus one loop per node (GCN's and GAT's A + I)."""
    keep = edge_index[:, edge_index[0] != edge_index[1]]
    loops = np.arange(n)
    return np.concatenate([keep, np.stack([loops, loops])], axis=1)


def gcn_reference(x, edge_index, weight, bias):
    n = len(x)
    ei = with_loops(edge_index, n)
    deg = np.bincount(ei[1], minlength=n).astype(float)
    h = x @ weight.T
    out = np.zeros((n, weight.shape[0]))
    for s, t in ei.T:
        out[t] += h[s] / np.sqrt(deg[s] * deg[t])
    return out + bias


def sage_reference(x, edge_index, w_l, b_l, w_r, aggr):
    n, f = x.shape
    agg = np.zeros((n, f))
    for i in range(n):
        nbrs = edge_index[0, edge_index[1] == i]
        if len(nbrs):
            rows = x[nbrs]
            agg[i] = {"mean": rows.mean(0), "max": rows.max(0), "sum": rows.sum(0)}[aggr]
    return agg @ w_l.T + b_l + x @ w_r.T


def gat_reference(x, edge_index, weight, att_src, att_dst, bias, heads, concat, slope=0.2):
    n = len(x)
    ei = with_loops(edge_index, n)
    h = (x @ weight.T).reshape(n, heads, -1)
    a_s = (h * att_src.reshape(1, heads, -1)).sum(-1)
    a_d = (h * att_dst.reshape(1, heads, -1)).sum(-1)
    logits = a_s[ei[0]] + a_d[ei[1]]
    logits = np.where(logits > 0, logits, slope * logits)
    out = np.zeros_like(h)
    for i in range(n):
        into = np.flatnonzero(ei[1] == i)
        z = logits[into] - logits[into].max(0)
        alpha = np.exp(z) / np.exp(z).sum(0)
        out[i] = (alpha[:, :, None] * h[ei[0, into]]).sum(0)
    out = out.reshape(n, -1) if concat else out.mean(1)
    return out + bias


class OneLayer(nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.conv = layer

    def forward(self, x, edges):
        return self.conv(x, edges)


def make_layer(kind, f_in, f_out, heads=2):
    if kind == "gcn":
        return nn.GCNConv(f_in, f_out)
    if kind.startswith("sage"):
        return nn.SAGEConv(f_in, f_out, aggr=kind.split("_")[1])
    if kind == "gat_concat":
        return nn.GATConv(f_in, f_out, heads=heads)
    return nn.GATConv(f_in, f_out, heads=heads, concat=False)


KINDS = ["gcn", "sage_mean", "sage_max", "sage_sum", "gat_concat", "gat_mean"]


def randomize(model, seed):
    """Non-zero biases and attention so every parameter matters."""
    rng = np.random.default_rng(seed)
    for _, p in model.named_parameters():
        p.data[...] = rng.normal(scale=0.7, size=p.data.shape)
