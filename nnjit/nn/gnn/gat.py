"""``GATConv``: graph attention (Veličković et al., 2018), as PyG's ``GATConv``."""

from __future__ import annotations

from nnjit.checks import Real
from nnjit.nn import functional as F
from nnjit.nn.gnn.base import MessagePassing, glorot, positive_int, zeros
from nnjit.nn.linear import Linear
from nnjit.ops.graph import head_dot, head_mean


class GATConv(MessagePassing):
    r"""Multi-head attention over each node's incoming edges (plus a self loop).

    Per head: :math:`h = W x`, :math:`e_{ji} = \mathrm{LeakyReLU}(a_s \cdot h_j + a_d \cdot h_i)`,
    :math:`\alpha_{ji} = \mathrm{softmax}_j(e_{ji})` over the edges into i, dropout on
    :math:`\alpha` while training, :math:`x'_i = \sum_j \alpha_{ji} h_j`; the heads are
    concatenated (``concat=True``, output ``heads * out_channels``) or averaged, plus a bias.

    Args:
        in_channels, out_channels: input width, width per head.
        heads: number of attention heads.
        concat: concatenate (True) or average the heads.
        negative_slope: LeakyReLU slope of the attention logits (0.2).
        dropout: dropout probability on the attention coefficients.
        add_self_loops: attend over :math:`A + I` (existing loops replaced by one per node).
        bias: add a learnable bias (zeros at init).

    Parameters as PyG's: ``lin.weight`` (heads*out, in), ``att_src`` and ``att_dst``
    (1, heads*out; PyG's (1, heads, out) flattened), ``bias``; Glorot initialisation.
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 bias: bool = True):
        super().__init__(in_channels, out_channels)
        self.heads = positive_int("GATConv", "heads", heads)
        dropout = Real(min=0, lt=1).check("GATConv: dropout", dropout)
        self.concat = bool(concat)
        self.negative_slope = Real().check("GATConv: negative_slope", negative_slope)
        self.dropout = float(dropout)
        self.add_self_loops = bool(add_self_loops)
        width = self.heads * out_channels
        self.lin = Linear(in_channels, width, bias=False)
        self.att_src = glorot((1, width), fan=(self.heads, out_channels))
        self.att_dst = glorot((1, width), fan=(self.heads, out_channels))
        self.bias = zeros(width if concat else out_channels) if bias else None

    def forward(self, x, edges):
        csr = "loops" if self.add_self_loops else "raw"
        h = self.lin(x)
        tape = h.tape
        a_src = head_dot(edges, h, self.param(tape, "att_src"), heads=self.heads)
        a_dst = head_dot(edges, h, self.param(tape, "att_dst"), heads=self.heads)
        scores = F.leaky_relu(edges.gather_add(a_src, a_dst, csr), self.negative_slope)
        alpha = edges.softmax(scores, csr)
        if self.dropout > 0.0:
            alpha = F.dropout(alpha, self.dropout)
        bias = self.param(tape, "bias")
        if self.concat:
            return edges.propagate(h, csr, alpha, bias)
        return head_mean(edges, edges.propagate(h, csr, alpha), bias, heads=self.heads)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, heads={self.heads}, "
                f"concat={self.concat}")
