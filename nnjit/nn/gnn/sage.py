"""``SAGEConv``: GraphSAGE (Hamilton et al., 2017), as PyG's ``SAGEConv``."""

from __future__ import annotations

from nnjit.graph.edges import SparseFeatures
from nnjit.nn.gnn.base import MessagePassing
from nnjit.nn.linear import Linear

AGGREGATIONS = ("mean", "max", "sum")


class SAGEConv(MessagePassing):
    r""":math:`x'_i = W_l \cdot \mathrm{aggr}_{j \to i} x_j + b + W_r x_i`.

    Args:
        in_channels, out_channels: feature widths.
        aggr: ``"mean"`` (default), ``"max"`` or ``"sum"`` over each node's incoming neighbours
            (0 for a node without any).
        root_weight: add the node's own transformed features (``lin_r``).
        bias: bias of ``lin_l``.

    Parameters ``lin_l.weight``, ``lin_l.bias``, ``lin_r.weight`` as PyG's names, initialised as
    PyTorch's ``Linear`` (as PyG). Mean and sum commute with the linear map, so when that is
    cheaper (fewer output than input columns, or sparse input) the features are transformed
    first and then aggregated: the same function, less work.
    """

    def __init__(self, in_channels: int, out_channels: int, aggr: str = "mean",
                 root_weight: bool = True, bias: bool = True):
        super().__init__(in_channels, out_channels)
        if aggr not in AGGREGATIONS:
            raise ValueError(f"SAGEConv: unknown aggr {aggr!r}; valid: {', '.join(AGGREGATIONS)}")
        self.aggr = aggr
        self.root_weight = bool(root_weight)
        self.lin_l = Linear(in_channels, out_channels, bias=bias, init="torch")
        self.lin_r = Linear(in_channels, out_channels, bias=False, init="torch") \
            if root_weight else None

    def forward(self, x, edges):
        tape = x.tape
        w, b = self.lin_l.tensors(tape)
        sparse = isinstance(x, SparseFeatures)
        if self.aggr == "max":
            if sparse:
                raise ValueError(f"SAGEConv '{self._path}': aggr='max' needs dense features; "
                                 "pass the graph with dense x")
            out = tape.dense(edges.max_aggregate(x), w, b)
        else:
            weights = edges.weights("mean") if self.aggr == "mean" else None
            if sparse or self.out_channels < self.in_channels:
                h = x.dense(w, None) if sparse else tape.dense(x, w, None)
                out = edges.propagate(h, "raw", weights, b)
            else:
                out = tape.dense(edges.propagate(x, "raw", weights), w, b)
        if self.lin_r is not None:
            out = out + self.lin_r(x)
        return out

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, aggr={self.aggr!r}"
