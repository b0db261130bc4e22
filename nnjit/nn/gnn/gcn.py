"""``GCNConv``: Kipf & Welling's graph convolution (PyG's ``GCNConv``)."""

from __future__ import annotations

from nnjit.nn.gnn.base import MessagePassing, zeros
from nnjit.nn.linear import Linear


class GCNConv(MessagePassing):
    r"""Graph convolution :math:`X' = \hat D^{-1/2} (A + I) \hat D^{-1/2} X W^T + b`.

    As PyG's ``GCNConv``: the linear map first, then propagation over the edges plus one self
    loop per node (existing self loops replaced), symmetric normalisation. The normalisation is
    computed once per forward pass and shared by every GCN layer of the model.

    Args:
        in_channels, out_channels: feature widths.
        bias: add a learnable bias (zeros at init).
        add_self_loops: propagate over :math:`A + I` (True) or :math:`A`.
        normalize: symmetric normalisation (False: plain sum).

    Parameters ``lin.weight`` (out, in, Glorot) and ``bias`` (out,) as PyG's names.
    """

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True,
                 add_self_loops: bool = True, normalize: bool = True):
        super().__init__(in_channels, out_channels)
        self.add_self_loops = bool(add_self_loops)
        self.normalize = bool(normalize)
        self.lin = Linear(in_channels, out_channels, bias=False)
        self.bias = zeros(out_channels) if bias else None

    def forward(self, x, edges):
        csr = "loops" if self.add_self_loops else "raw"
        h = self.lin(x)
        weights = edges.weights("gcn", csr) if self.normalize else None
        return edges.propagate(h, csr, weights, self.param(h.tape, "bias"))
