"""``GraphNet``: a stack of graph convolutions, as the ``Nets.GRAPH_*`` factories build it."""

from __future__ import annotations

from nnjit.nn import functional as F
from nnjit.nn.dropout import Dropout
from nnjit.nn.gnn.gat import GATConv
from nnjit.nn.module import Module


class GraphNet(Module):
    """``[dropout ->] conv -> activation`` per hidden layer, then ``[dropout ->] conv``.

    The layout of PyG's GCN/GAT examples: dropout before every convolution (on the input
    features too), the activation after every hidden one.

    Args:
        conv: the layer class (:class:`GCNConv`, :class:`SAGEConv`, :class:`GATConv`).
        dims: feature widths, input first, output last (at least two).
        activation: an activation module applied after each hidden convolution.
        dropout: drop probability before each convolution (0: none).
        heads: GAT heads of the hidden layers (concatenated); the output layer has one head.
        **conv_options: passed to every convolution (e.g. ``aggr="max"`` for SAGE).
    """

    def __init__(self, conv, dims, activation, dropout: float = 0.0, heads: int = 1,
                 **conv_options):
        super().__init__()
        dims = list(dims)
        if len(dims) < 2:
            raise ValueError(f"GraphNet: dims needs an input and an output width, got {dims}")
        self.n_layers = len(dims) - 1
        width = dims[0]
        for i, d_out in enumerate(dims[1:]):
            last = i == self.n_layers - 1
            if conv is GATConv:
                layer = GATConv(width, d_out, heads=1 if last else heads, concat=not last,
                                dropout=dropout, **conv_options)
                width = d_out * (1 if last else heads)
            else:
                layer = conv(width, d_out, **conv_options)
                width = d_out
            self.add_module(f"conv{i + 1}", layer)
        self.activation = activation
        self.drop = Dropout(dropout) if dropout > 0 else None

    def forward(self, x, edges):
        for i in range(self.n_layers):
            if self.drop is not None:
                x = F.dropout(x, self.drop.p)
            x = getattr(self, f"conv{i + 1}")(x, edges)
            if i < self.n_layers - 1:
                x = self.activation(x)
        return x
